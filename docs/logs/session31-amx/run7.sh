#!/usr/bin/env bash
# Session 31, run 7: the clock the cores run at during the benchmarks
# (APERF through the msr PMU, the "GHz" metric), 1 thread: the FMA peak
# loop, the AVX-512 micro-kernels, whole calls on avx512 and amx, and the
# fused AMX form.
set -u
gunzip -kf bin/cpu.test.gz
ls /sys/bus/event_source/devices/msr/events/ | tee $OUT/msr-events.txt
for r in 1 2; do
  GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench 'PeakFMA/avx512|Kernels/(pv4|scores4|scoresSoftmax4)/avx512|CPU/(mission|long)/fp32/(avx512|amx)$|AMX/(attend64|step)' -test.count 1
done 2>&1 | tee $OUT/clock.txt | grep Bench
