# Run 6 (session 40): where the FP8 call's extra time goes on the Xeon: a temporary benchmark
# (not committed) alternating the FP32 and FP8 calls on cpu/avx512 under pprof labels, 1 thread,
# profiled twice; per-label profiles summarized with go tool pprof -tagfocus on this machine.
set -u
r=$OUT/run6; mkdir -p $r
cd sdpa
for i in 1 2; do
  GOMAXPROCS=1 ../bin/sdpa-labels.test -test.run '^$' -test.bench ZZLabels -test.benchtime 4s -test.cpuprofile $r/lab-$i.prof | grep ^Bench
done
