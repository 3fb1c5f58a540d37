# Run 6 (session 38): the public calls at 1 thread, mission shape, FP32 and FP8, four builds
# alternated over three rounds: old (1c6907e), new, new without the PREFETCHW of the decoded V rows
# (novdec), new without any prefetch on FP8 problems (nofp8).
set -u
r=$OUT/run6; mkdir -p $r
cd sdpa
for i in 1 2 3; do
  for b in old new novdec nofp8; do
    GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.benchtime 2s -test.count 1 > $r/$b-r$i.txt 2>&1
    echo "$b r$i $(grep -o '[0-9]* ns/op' $r/$b-r$i.txt | tr '\n' ' ')"
  done
done | tee $r/summary.txt
