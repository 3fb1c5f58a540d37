#!/usr/bin/env bash
# Session 31, run 2: where an AMX step's time goes (BenchmarkAMX), 1 thread.
set -u
gunzip -kf bin/cpu.test.gz
GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench 'AMX' -test.count 3 > $OUT/bench-amx.txt 2>&1
grep Bench $OUT/bench-amx.txt
