# Run 10 (session 40): is run 9's public-call loss of the AMX FP8 path the alternation with FP32
# calls? BenchmarkPublicCall/FP8E4M3 alone (no FP32 call between), base (avx512) and amx (amxfp8
# first), alternated, three rounds at 1 thread; then FP32 alone on both, then run 9's paired once more.
set -u
r=$OUT/run10; mkdir -p $r
cd sdpa
for i in 1 2 3; do for b in base amx; do
  GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP8E4M3$' -test.benchtime 1s | grep ^Bench | sed "s/^/$b r$i /" >> $r/fp8-alone.txt
done; done
for b in base amx; do
  GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP32$' -test.benchtime 1s | grep ^Bench | sed "s/^/$b /" >> $r/fp32-alone.txt
  GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCallPaired' -test.benchtime 2s | grep ^Bench | sed "s/^/$b /" >> $r/paired.txt
done
cat $r/fp8-alone.txt $r/fp32-alone.txt $r/paired.txt | awk '{print $1, $2, $3, $5, $7}'
