# Run 2 (session 37): a fresh machine. The issue's own measure first (scripts/cpu-side-by-side.sh with
# bin/sdpabench of 6a2bbe5, 1 thread, nine rounds), then twelve rounds of old (906db42), new (6a2bbe5)
# and PyTorch, the order rotated round by round, 1 thread.
set -u
r=$OUT/run2; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
echo "== side by side (new), 1 thread, 9 rounds"
THREADS=1 ROUNDS=9 OUT=$r/sbs1 bash scripts/cpu-side-by-side.sh 2>&1 | grep -E 'MEDIAN|BEST|FAIL'
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
cp $r/sbs1/summary.txt $r/sbs1-summary.txt 2>/dev/null
cd $OUT && tar czf run2.tgz run2 && rm -rf run2/*.json run2/*.log run2/sbs1
