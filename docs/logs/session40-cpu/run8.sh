# Run 8 (session 40): the AVX-512 rounder's quotient by a reciprocal and two FMA corrections, checked by the rounder's overflow test only
# (new) against VDIVPS (old, 33f682b's fp8) on the Xeon: the fp8 tests of it, BenchmarkQuantize's
# round and quantize (alternated, three rounds), then the public call by BenchmarkPublicCallPaired,
# new2 (with it) against new (run 3's binary), alternated, three rounds at 1 thread.
set -u
r=$OUT/run8; mkdir -p $r
(cd fp8 && ../bin/fp8-new.test -test.run 'Quotient|NearMidpoints|Scales|AllInputs' -test.short -test.v 2>&1 | grep -E '^(---|ok|PASS|FAIL)' > $r/fp8-tests.txt)
cat $r/fp8-tests.txt
cd fp8
for i in 1 2 3; do for b in old new; do
  GOMAXPROCS=1 ../bin/fp8-$b.test -test.run '^$' -test.bench 'Quantize/(round|quantize)$' -test.benchtime 0.5s | grep ^Bench | sed "s/^/$b r$i /" >> $r/fp8-bench.txt
done; done
cd ../sdpa
for i in 1 2 3; do for b in new new2; do
  GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s | grep ^Bench | sed "s/^/$b t1 r$i /" >> $r/paired.txt
done; done
cd ..
awk '{print $1, $2, $3, $(NF-1), $NF}' $r/fp8-bench.txt
awk '{print $1, $2, $3, $(NF-5), $(NF-3), $(NF-1)}' $r/paired.txt
