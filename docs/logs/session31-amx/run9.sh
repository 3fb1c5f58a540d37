#!/usr/bin/env bash
# Session 31, run 9: does tile work slow the vector units after it?
# BenchmarkAMXClock (the AVX-512 FMA peak loop right after ~10 us bursts of
# tile products or of the AVX-512 softmax), 1 thread, six rounds, each
# burst kind in its own process, the order reversed every other round; and
# BenchmarkPeakFMA alone in each round.
set -u
gunzip -kf bin/cpu.test.gz
for r in 1 2 3 4 5 6; do
  list="avx512 amx peak"
  [ $((r % 2)) = 0 ] && list="peak amx avx512"
  for k in $list; do
    pat="AMXClock/after-$k\$"
    [ $k = peak ] && pat='PeakFMA/avx512$'
    GOMAXPROCS=1 bin/cpu.test -test.run XXX -test.bench "$pat" -test.benchtime 1s | grep -E '^Benchmark' | awk -v r=$r '{print "round " r ": " $1, $5, $6}'
  done
done | tee $OUT/clock.txt
