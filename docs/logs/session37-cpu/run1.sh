# Run 1 (session 37): the backend suite on the Xeon (AMX set included) with the new tree's test
# binary; BenchmarkKernels and BenchmarkPeakFMA old/new at 1 thread; then twelve rounds of
# old (906db42), new (the scale folded into the exponentials, the lazy test lane by lane, EXP16
# without its mask) and PyTorch, the order rotated round by round, 1 thread.
set -u
r=$OUT/run1; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
(cd backend/cpu && ../../bin/cpu-new.test -test.count=1 > $r/suite.txt 2>&1; echo "suite rc $?"; tail -3 $r/suite.txt)
for b in old new; do
  (cd backend/cpu && GOMAXPROCS=1 ../../bin/cpu-$b.test -test.run '^$' -test.bench 'BenchmarkKernels/(scores4|scoresSoftmax4|pv4)/avx512$|BenchmarkPeakFMA/avx512' -test.count 3 > $r/kernels-$b.txt 2>&1)
done
grep -h GFLOP $r/kernels-*.txt | awk '{print $1, $(NF-1), $NF}' | head -30
sh=2x8x256x256x64,1x8x1024x1024x64
old() { GOMAXPROCS=1 bin/sdpabench-old -backend cpu -precision fp32 -shapes $sh -nocheck -json $r/old-$1.json > $r/old-$1.log 2>&1; }
new() { GOMAXPROCS=1 bin/sdpabench -backend cpu -precision fp32 -shapes $sh -nocheck -json $r/new-$1.json > $r/new-$1.log 2>&1; }
torch() { python3 bench/torch_cpu_sdpa.py $r/torch-$1.json 1 $sh > $r/torch-$1.log 2>&1; }
N=12
for i in $(seq 1 $N); do
  case $((i % 3)) in
    0) old $i; new $i; torch $i;;
    1) new $i; torch $i; old $i;;
    2) torch $i; old $i; new $i;;
  esac
done
python3 docs/logs/session36-cpu/summary.py $r $N | tee $r/summary.txt | grep -E "MEDIAN|BEST"
cd $OUT && tar czf run1.tgz run1 && rm -rf run1/*.json run1/*.log
