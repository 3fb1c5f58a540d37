#!/usr/bin/env bash
# Session 31, run 1 (device Xeon, 1 and 16 threads): the AMX path's tests,
# then BenchmarkCPU amx against avx512 at 1 thread, then the side-by-side
# with PyTorch (sdpabench's default CPU set, amx where the CPU has it).
set -u
gunzip -kf bin/cpu.test.gz bin/sdpabench.gz
lscpu > $OUT/lscpu.txt
bin/cpu.test -test.run 'TestISAs|AMX|TestConformance$/amx|TestNoAllocs' -test.v > $OUT/tests.txt 2>&1
echo "tests rc=$?" >> $OUT/tests.txt
grep -E '^(--- |ok|FAIL|PASS)|amx_amd64_test|cpu_test' $OUT/tests.txt | grep -v '=== ' | head -60
GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench 'CPU/(mission|long)/(fp32|fp8)/(amx|avx512)$' -test.count 3 > $OUT/bench1.txt 2>&1
grep Bench $OUT/bench1.txt
THREADS="1 all" ROUNDS=5 OUT=$OUT/sbs bash scripts/cpu-side-by-side.sh > $OUT/sbs.log 2>&1
tail -12 $OUT/sbs/summary.txt
