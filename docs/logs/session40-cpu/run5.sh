# Run 5 (session 40): the quantization pass's groups in reverse of the attention's first reads
# (new2) against run 3's binary (new), BenchmarkPublicCallPaired on the Xeon, alternated, four
# rounds at 1 thread and two at 16.
set -u
r=$OUT/run5; mkdir -p $r
cd sdpa
for i in 1 2 3 4; do
  for b in new new2; do
    GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s -test.count 1 | grep ^Bench | sed "s/^/$b t1 r$i /" >> $r/paired.txt
  done
done
for i in 1 2; do
  for b in new new2; do
    GOMAXPROCS=16 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s -test.count 1 | grep ^Bench | sed "s/^/$b t16 r$i /" >> $r/paired.txt
  done
done
awk '{print $1, $2, $3, $(NF-5), $(NF-3), $(NF-1)}' $r/paired.txt
