# Run 13 (session 40): the committed form of amxfp8 (FP8 problems on AMX tiles with exact operands,
# the fused form's three product steps; the default where AMX is granted) on the Xeon: the tests
# (cpu-new), two broken builds (cpu-broken: the weights' m part left out of the exact P·V, must fail
# TestAMXAttend64; cpu-broken2: GQA-packed FP8 rows, which are not exact, run the exact form, must fail
# the conformance suite on amxfp8), BenchmarkCPU (mission, long; fp32, fp8; avx512, amxfp8; 1 thread,
# two runs), then the public call paired: new (amxfp8 default) against base (avx512 default),
# alternated, three rounds at 1 thread and three at 16.
set -u
r=$OUT/run13; mkdir -p $r
cd backend/cpu
../../bin/cpu-new.test -test.count 1 -test.v -test.run 'AMX|Conformance|NoAllocs|ISAs|Pair|Steps4' 2>&1 | grep -E '^(--- |ok|PASS|FAIL)' > $r/tests.txt; echo "rc ${PIPESTATUS[0]}" >> $r/tests.txt
../../bin/cpu-broken.test -test.count 1 -test.run 'TestAMXAttend64' 2>&1 | tail -4 > $r/broken.txt
../../bin/cpu-broken2.test -test.count 1 -test.run 'TestConformance$' 2>&1 | grep -E '^\s+--- FAIL' > $r/broken2.txt; echo "failing subtests: $(grep -c '        --- FAIL' $r/broken2.txt)" >> $r/broken2.txt
GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench 'CPU/(mission|long)/fp(32|8)/(avx512|amxfp8)$' -test.count 2 | grep ^Bench > $r/backend.txt
cd ../../sdpa
for t in 1 16; do for i in 1 2 3; do for b in base new; do
  GOMAXPROCS=$t ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s | grep ^Bench | sed "s/^/$b t$t r$i /" >> $r/paired.txt
done; done; done
cd ..
grep -E "^--- |^rc" $r/tests.txt; cat $r/broken.txt; grep -v "^ *---" $r/broken2.txt; grep -E "^\s{4}--- FAIL" $r/broken2.txt | head -4
awk '{print $1, $(NF-5), $(NF-4)}' $r/backend.txt
awk '{print $1, $2, $3, $(NF-5), $(NF-3), $(NF-1)}' $r/paired.txt
