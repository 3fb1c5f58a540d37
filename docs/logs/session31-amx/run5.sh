#!/usr/bin/env bash
# Session 31, run 5: the AVX-512 path after this session's changes (the
# softmax macro moved to softmax_amd64.h, attendRows' AMX checks) against
# 44ffb93's, BenchmarkCPU at 1 thread, alternating, 7 rounds.
set -u
for f in bin/*.gz; do gunzip -kf $f; done
for r in 1 2 3 4 5 6 7; do
  for b in cpu-old cpu; do
    echo -n "round $r $b: "
    GOMAXPROCS=1 bin/$b.test -test.run XXX -test.bench 'CPU/(mission|long)/fp32/avx512$' | grep Bench | awk '{printf "%s %s  ", $1, $5}'
    echo
  done
done | tee $OUT/ab.txt
