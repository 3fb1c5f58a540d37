# Run 2 (session 36): the lazy rescale, P·V without the rescale where alpha is 1, the AVX-512 panel transpose,
# the rows' outputs in one call, and the loops of run 1 (issue #11), on the device Xeon.
# bin/cpu-old.test, bin/sdpabench-old: 10104e9; bin/cpu-new.test, bin/sdpabench: the session's tree.
set -u
r=$OUT/run2; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
echo "== the CPU suite on this Xeon (new)"
bin/cpu-new.test -test.count=1 2>&1 | tail -2
echo "== kernels and FMA peak, 1 thread, old then new, 3 rounds"
for i in 1 2 3; do for b in old new; do
  GOMAXPROCS=1 bin/cpu-$b.test -test.run XXX -test.bench 'Kernels/(scores4|pv4)/avx512$|PeakFMA/avx512|CPU/(mission|long)/fp32/avx512' 2>&1 | grep Bench | sed "s/^/$b r$i /"
done; done | tee $r/kernels.txt
sh=2x8x256x256x64,1x8x1024x1024x64
old() { GOMAXPROCS=1 bin/sdpabench-old -backend cpu -precision fp32 -shapes $sh -nocheck -json $r/old-$1.json > $r/old-$1.log 2>&1; }
new() { GOMAXPROCS=1 bin/sdpabench -backend cpu -precision fp32 -shapes $sh -nocheck -json $r/new-$1.json > $r/new-$1.log 2>&1; }
torch() { python3 bench/torch_cpu_sdpa.py $r/torch-$1.json 1 $sh > $r/torch-$1.log 2>&1; }
N=${ROUNDS:-12}
for i in $(seq 1 $N); do
  case $((i % 3)) in
    0) old $i; new $i; torch $i;;
    1) new $i; torch $i; old $i;;
    2) torch $i; old $i; new $i;;
  esac
done
python3 docs/logs/session36-cpu/summary.py $r $N | tee $r/summary.txt
echo "== side by side (new), 16 threads, 2 rounds"
THREADS=all ROUNDS=2 OUT=$r/sbs16 bash scripts/cpu-side-by-side.sh 2>&1 | grep -E 'MEDIAN|BEST|FAIL'
cd $OUT && tar czf run2.tgz run2 && rm -rf run2/*.json run2/*.log
