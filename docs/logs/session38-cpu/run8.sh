# Run 8 (session 38): where the FP8 public call's extra time goes on the Xeon, 1 thread, mission
# shape: CPU profiles of 1000 calls each of the FP32 and FP8 public calls (new tree), twice,
# alternating; then the backend alone on FP32 and on E4M3 codes (BenchmarkCPU, four counts).
set -u
r=$OUT/run8; mkdir -p $r
cd sdpa
for i in 1 2; do
  for c in FP32 FP8E4M3; do
    GOMAXPROCS=1 ../bin/sdpa-new.test -test.run '^$' -test.bench "PublicCall/$c\$" -test.benchtime 1000x -test.count 1 -test.cpuprofile $r/$c-$i.prof >> $r/bench.txt 2>&1
  done
done
grep ns/op $r/bench.txt
cd ../backend/cpu
GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench 'BenchmarkCPU/mission/(fp32|fp8)/avx512$' -test.count 4 > $r/backend.txt 2>&1
grep ns/op $r/backend.txt
