# Run 5 (session 38): CPU profiles of the public calls at 1 thread on the Xeon, FP32 and FP8
# (sdpa.Attention from float32 slices, mission shape), new tree: where the FP8 call's extra time goes.
set -u
r=$OUT/run5; mkdir -p $r
cd sdpa
for c in FP32 FP8E4M3 FP32 FP8E4M3; do
  GOMAXPROCS=1 ../bin/sdpa-new.test -test.run '^$' -test.bench "PublicCall/$c\$" -test.benchtime 4s -test.count 1 -test.cpuprofile $r/$c.prof >> $r/bench.txt 2>&1
done
grep ns/op $r/bench.txt
