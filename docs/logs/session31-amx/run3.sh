#!/usr/bin/env bash
# Session 31, run 3: the fused AMX form (amxAttend64): tests, where a
# group's time goes, BenchmarkCPU amx against avx512 at 1 thread, and the
# side-by-side with PyTorch at 1 and 16 threads.
set -u
gunzip -kf bin/cpu.test.gz bin/sdpabench.gz
bin/cpu.test -test.run 'TestISAs|AMX|TestConformance$/amx|TestConformanceOnRead/amx|TestNoAllocs' -test.v > $OUT/tests.txt 2>&1
echo "tests rc=$?" >> $OUT/tests.txt
grep -E '^(--- |ok|FAIL|PASS)|tests rc' $OUT/tests.txt | head -40
GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench 'AMX' -test.count 3 > $OUT/bench-amx.txt 2>&1
grep -E 'step|attend64|gemm/ks=2' $OUT/bench-amx.txt
GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench 'CPU/(mission|long)/(fp32|fp8)/(amx|avx512)$' -test.count 3 > $OUT/bench1.txt 2>&1
grep Bench $OUT/bench1.txt
THREADS="1 all" ROUNDS=5 OUT=$OUT/sbs bash scripts/cpu-side-by-side.sh > $OUT/sbs.log 2>&1
grep MEDIAN $OUT/sbs/summary.txt
cd $OUT && tar czf sbs.tgz sbs && rm -rf sbs
