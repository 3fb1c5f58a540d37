# Run 11 (session 40): where the AMX FP8 public call's time goes: CPU profiles (1 thread) of
# BenchmarkPublicCall/FP8E4M3 on amx (amxfp8 first) and base, and of BenchmarkCPU/mission/fp8 on
# amxfp8 (pre-quantized codes) from cpu-new; pprof tops made on the workplace machine.
set -u
r=$OUT/run11; mkdir -p $r
cd sdpa
for b in amx base; do
  GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP8E4M3$' -test.benchtime 3s -test.cpuprofile $r/pub-$b.prof | grep ^Bench
done
cd ../backend/cpu
GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench 'CPU/mission/fp8/amxfp8$' -test.benchtime 3s -test.cpuprofile $r/cpu-amx.prof | grep ^Bench
