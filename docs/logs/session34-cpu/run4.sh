# Run 4: CPU profiles of the committed binary (02bae52) at 1 thread, mission and long FP32, on the
# device Xeon (pprof's SIGPROF sampling; the machine has no perf). Three passes each.
set -u
for pass in 1 2 3; do
  for sh in mission long; do
    GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench "CPU/$sh/fp32/avx512\$" -test.benchtime 3s \
      -test.cpuprofile $OUT/$sh-$pass.prof | grep GFLOP
  done
done
