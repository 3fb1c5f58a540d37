# Run 3 (session 40): the FP8/FP32 ratio of the public call by BenchmarkPublicCallPaired (the
# two calls timed one by one in adjacent pairs, order alternating), on the Xeon, at 1 and 16
# threads, five runs each of 2 s, the thread counts interleaved.
set -u
r=$OUT/run3; mkdir -p $r
cd sdpa
for i in 1 2 3 4 5; do
  for t in 1 16; do
    GOMAXPROCS=$t ../bin/sdpa-new.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s -test.count 1 | grep ^Bench | sed "s/^/t$t r$i /" >> $r/paired.txt
  done
done
cat $r/paired.txt
