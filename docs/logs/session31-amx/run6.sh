#!/usr/bin/env bash
# Session 31, run 6: the AMX tests after the test helpers and amxGemm6's
# pair macro (refactors), on the device Xeon.
set -u
gunzip -kf bin/cpu.test.gz
bin/cpu.test -test.run 'AMX|TestConformance$/amx|TestConformanceOnRead/amx|TestNoAllocs|TestISAs' -test.v > $OUT/tests.txt 2>&1
echo "tests rc=$?" >> $OUT/tests.txt
grep -E '^(--- |ok|FAIL|PASS)|tests rc' $OUT/tests.txt | tee $OUT/tests-summary.txt
