#!/usr/bin/env bash
# Session 31, run 4: where the fused AMX form's time goes. Diagnostic builds
# (wrong by design; go test -c -asmflags=-D=AMX_DIAG_X) against the base
# build, BenchmarkAMX/attend64 (4 panels), 1 thread, 3 rounds alternating;
# then the tests of the committed order (avx512 default, amx selectable).
set -u
for f in bin/*.gz; do gunzip -kf $f; done
for r in 1 2 3; do
  for b in cpu NOSOFTMAX NOQK NOSPLIT NOPV; do
    t=bin/diag-$b.test; [ $b = cpu ] && t=bin/cpu.test
    echo -n "round $r $b: "
    GOMAXPROCS=1 $t -test.run XXX -test.bench 'AMX/(attend64|softmax16|splitP)' | grep -E 'attend64' | awk '{print $3, $4}'
  done
done | tee $OUT/diag.txt
bin/cpu.test -test.run 'TestISAs|AMX|TestConformance$|TestConformanceOnRead|TestNoAllocs' -test.v > $OUT/tests.txt 2>&1
echo "tests rc=$?" | tee -a $OUT/tests.txt
grep -E '^(--- |ok|FAIL|PASS)' $OUT/tests.txt | head -30
