# summary.py DIR N: per-round old/new/torch GFLOP/s from sdpabench and bench/torch_cpu_sdpa.py JSON,
# the medians of the per-round ratios and the ratios of each side's fastest round.
import json, statistics, sys
r, n = sys.argv[1], int(sys.argv[2])
def g(name, i): return {x["shape"]: x["gflops"] for x in json.load(open(f"{r}/{name}-{i}.json"))}
rows = {}
for i in range(1, n + 1):
    o, w, t = g("old", i), g("new", i), g("torch", i)
    for s in t:
        rows.setdefault(s, []).append((o[s], w[s], t[s]))
        print(f"{s:18s} round {i:2d}  old {o[s]:6.1f}  new {w[s]:6.1f}  torch {t[s]:6.1f}  new/torch {w[s]/t[s]:.2f}  old/torch {o[s]/t[s]:.2f}  new/old {w[s]/o[s]:.2f}")
for s, v in rows.items():
    med = lambda k: statistics.median(k(x) for x in v)
    best = [max(x[j] for x in v) for j in range(3)]
    print(f"{s:18s} MEDIAN of {len(v)}: old {med(lambda x: x[0]):.1f} new {med(lambda x: x[1]):.1f} torch {med(lambda x: x[2]):.1f}; "
          f"ratios new/torch {med(lambda x: x[1]/x[2]):.3f} old/torch {med(lambda x: x[0]/x[2]):.3f} new/old {med(lambda x: x[1]/x[0]):.3f}")
    print(f"{s:18s} BEST of {len(v)}: old {best[0]:.1f} new {best[1]:.1f} torch {best[2]:.1f}; new/torch {best[1]/best[2]:.3f} old/torch {best[0]/best[2]:.3f} new/old {best[1]/best[0]:.3f}")
