# Run 2 (session 35): old (79dbc4f) and new sdpabench beside PyTorch at 1 thread, 12 rounds, one run;
# each round runs the three in an order rotated round by round. Summary: per-round ratios, medians, bests.
set -u
r=$OUT/run2; mkdir -p $r
sh=2x8x256x256x64,1x8x1024x1024x64
old() { GOMAXPROCS=1 bin/sdpabench-old -backend cpu -precision fp32 -shapes $sh -nocheck -json $r/old-$1.json > $r/old-$1.log 2>&1; }
new() { GOMAXPROCS=1 bin/sdpabench -backend cpu -precision fp32 -shapes $sh -nocheck -json $r/new-$1.json > $r/new-$1.log 2>&1; }
torch() { python3 bench/torch_cpu_sdpa.py $r/torch-$1.json 1 $sh > $r/torch-$1.log 2>&1; }
for i in $(seq 1 12); do
  case $((i % 3)) in
    0) old $i; new $i; torch $i;;
    1) new $i; torch $i; old $i;;
    2) torch $i; old $i; new $i;;
  esac
done
python3 - $r <<'PY' | tee $r/summary.txt
import json, statistics, sys
r = sys.argv[1]
def g(name, i): return {x["shape"]: x["gflops"] for x in json.load(open(f"{r}/{name}-{i}.json"))}
rows = {}
for i in range(1, 13):
    o, n, t = g("old", i), g("new", i), g("torch", i)
    for s in t:
        rows.setdefault(s, []).append((o[s], n[s], t[s]))
        print(f"{s:18s} round {i:2d}  old {o[s]:6.1f}  new {n[s]:6.1f}  torch {t[s]:6.1f}  new/torch {n[s]/t[s]:.2f}  old/torch {o[s]/t[s]:.2f}  new/old {n[s]/o[s]:.2f}")
for s, v in rows.items():
    med = lambda k: statistics.median(k(x) for x in v)
    best = [max(x[j] for x in v) for j in range(3)]
    print(f"{s:18s} MEDIAN of {len(v)}: old {med(lambda x: x[0]):.1f} new {med(lambda x: x[1]):.1f} torch {med(lambda x: x[2]):.1f}; "
          f"ratios new/torch {med(lambda x: x[1]/x[2]):.3f} old/torch {med(lambda x: x[0]/x[2]):.3f} new/old {med(lambda x: x[1]/x[0]):.3f}")
    print(f"{s:18s} BEST of {len(v)}: old {best[0]:.1f} new {best[1]:.1f} torch {best[2]:.1f}; new/torch {best[1]/best[2]:.3f} old/torch {best[0]/best[2]:.3f} new/old {best[1]/best[0]:.3f}")
PY
cd $OUT && tar czf run2.tgz run2 && rm -rf run2
