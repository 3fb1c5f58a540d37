# Run 12 (session 40): the AMX fused form with exact operands (FP8: one of six products for Q·Kᵀ,
# three for P·V) on the Xeon: the AMX tests and the conformance suite (cpu-new), the broken build
# that leaves out the weights' m part (cpu-broken, must fail TestAMXAttend64), BenchmarkCPU at
# mission, fp8, avx512 against amxfp8 (now with the fused form: run 9-11 ran amxfp8 without it) (1 thread, three runs), then the public call paired on
# base (avx512 the default) and amx (a build with amxfp8 first), alternated, three rounds at 1 thread
# and two at 16.
set -u
r=$OUT/run12; mkdir -p $r
cd backend/cpu
../../bin/cpu-new.test -test.count 1 -test.v -test.run 'AMX|Conformance|NoAllocs|ISAs' 2>&1 | grep -E '^(--- |ok|PASS|FAIL)|amx_amd64_test' > $r/tests.txt; echo "rc ${PIPESTATUS[0]}" >> $r/tests.txt
../../bin/cpu-broken.test -test.count 1 -test.run 'TestAMXAttend64' 2>&1 | tail -4 > $r/broken.txt
GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench 'CPU/(mission|long)/fp8/(avx512|amxfp8)$' -test.count 3 | grep ^Bench > $r/backend.txt
cd ../../sdpa
for i in 1 2 3; do for b in base amx; do
  GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s | grep ^Bench | sed "s/^/$b t1 r$i /" >> $r/paired.txt
done; done
for i in 1 2; do for b in base amx; do
  GOMAXPROCS=16 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s | grep ^Bench | sed "s/^/$b t16 r$i /" >> $r/paired.txt
done; done
cd ..
grep -E "^--- |^rc" $r/tests.txt; cat $r/broken.txt
awk '{print $1, $(NF-3), $(NF-2)}' $r/backend.txt
awk '{print $1, $2, $3, $(NF-5), $(NF-3), $(NF-1)}' $r/paired.txt
cd sdpa
GOMAXPROCS=1 ../bin/sdpa-amx.test -test.run '^$' -test.bench 'PublicCall/FP8E4M3$' -test.benchtime 2s -test.cpuprofile $r/pub-amx.prof | grep ^Bench
