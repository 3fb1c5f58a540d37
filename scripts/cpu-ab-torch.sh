#!/usr/bin/env bash
# Runs two builds of our CPU backend and PyTorch's CPU SDPA side by side, FP32, on a machine with
# PyTorch and no Go (the GPU machine's CPU), with both sdpabench binaries cross-compiled here:
# OLD (default bin/sdpabench-old) and NEW (default bin/sdpabench). ROUNDS rounds (default 12), the
# order of the three rotated round by round so that drifts in the machine's speed hit each side
# alike, on THREADS threads (default 1). Writes each round's JSON and log and summary.txt under OUT
# (default ./out): per-round GFLOP/s and ratios, the medians of the per-round ratios, and the ratios
# of each side's fastest round (on a shared machine, whose noise only ever slows a side down, the
# fastest rounds are the steadier estimate; docs/BENCHMARKS.md, "Method").
# Usage: OUT=dir [ROUNDS=12] [THREADS=1] [OLD=bin] [NEW=bin] scripts/cpu-ab-torch.sh [SHAPES]
set -uo pipefail
r=${OUT:-out}
sh=${1:-2x8x256x256x64,1x8x1024x1024x64}
n=${ROUNDS:-12}
t=${THREADS:-1}
oldbin=${OLD:-bin/sdpabench-old}
newbin=${NEW:-bin/sdpabench}
mkdir -p "$r"
old() { GOMAXPROCS=$t "$oldbin" -backend cpu -precision fp32 -shapes "$sh" -nocheck -json "$r/old-$1.json" > "$r/old-$1.log" 2>&1; }
new() { GOMAXPROCS=$t "$newbin" -backend cpu -precision fp32 -shapes "$sh" -nocheck -json "$r/new-$1.json" > "$r/new-$1.log" 2>&1; }
torch() { python3 bench/torch_cpu_sdpa.py "$r/torch-$1.json" "$t" "$sh" > "$r/torch-$1.log" 2>&1; }
for i in $(seq 1 "$n"); do
  case $((i % 3)) in
    0) old "$i"; new "$i"; torch "$i";;
    1) new "$i"; torch "$i"; old "$i";;
    2) torch "$i"; old "$i"; new "$i";;
  esac
done
python3 - "$r" "$n" <<'PY' | tee "$r/summary.txt"
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
PY
