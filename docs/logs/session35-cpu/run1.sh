# Run 1 (session 35): the base-2 softmax, the LSE loop and steps4 on the device Xeon (issue #11).
# bin/cpu-old.test and bin/sdpabench-old: 79dbc4f; bin/cpu-new.test and bin/sdpabench: the session's tree.
set -u
r=$OUT/run1; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
echo "== the CPU suite on this Xeon (new)"
bin/cpu-new.test -test.count=1 2>&1 | tail -3
bin/cpu-new.test -test.count=1 -test.run 'Exp|Steps4|HugeScale' -test.v 2>&1 | grep -E 'ulp|^--- |^ok|FAIL'
echo "== kernels and FMA peak, 1 thread, old then new, 3 rounds"
for i in 1 2 3; do for b in old new; do
  GOMAXPROCS=1 bin/cpu-$b.test -test.run XXX -test.bench 'Kernels//avx512|PeakFMA/avx512' 2>&1 | grep Bench | sed "s/^/$b r$i /"
done; done | tee $r/kernels.txt
echo "== sdpabench fp32 1 thread, old/new alternating, 5 rounds"
for i in 1 2 3 4 5; do for b in sdpabench-old sdpabench; do
  GOMAXPROCS=1 bin/$b -backend cpu -precision fp32 -shapes 2x8x256x256x64,1x8x1024x1024x64 -nocheck 2>&1 | grep p50 | sed "s/^/$b r$i /"
done; done | tee $r/ab.txt
echo "== side by side, 1 thread, 9 rounds"
THREADS=1 ROUNDS=9 OUT=$r/sbs1 bash scripts/cpu-side-by-side.sh 2>&1 | grep -E 'MEDIAN|BEST|FAIL|Model'
echo "== side by side, 16 threads, 3 rounds"
THREADS=all ROUNDS=3 OUT=$r/sbs16 bash scripts/cpu-side-by-side.sh 2>&1 | grep -E 'MEDIAN|BEST|FAIL'
cd $OUT && tar czf run1-sbs.tgz run1/sbs1 run1/sbs16 && rm -rf run1/sbs1 run1/sbs16
