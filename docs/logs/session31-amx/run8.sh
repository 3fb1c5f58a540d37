#!/usr/bin/env bash
# Session 31, run 8: run 4's diagnostic builds of the fused AMX form again,
# five rounds, the order of the builds reversed every other round,
# BenchmarkAMX/attend64 (4 panels) with -test.benchtime 2s, 1 thread.
set -u
for f in bin/*.gz; do gunzip -kf $f; done
order="base NOSOFTMAX NOQK NOSPLIT NOPV"
for r in 1 2 3 4 5; do
  list=$order
  [ $((r % 2)) = 0 ] && list=$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')
  for b in $list; do
    echo -n "round $r $b: "
    GOMAXPROCS=1 bin/diag-$b.test -test.run XXX -test.bench 'AMX/attend64' -test.benchtime 2s | grep -E 'attend64' | awk '{print $3, $4}'
  done
done | tee $OUT/diag.txt
