#!/usr/bin/env bash
# Runs our CPU backend and PyTorch's CPU SDPA side by side in one run, on a
# machine with PyTorch and no Go (the GPU machine's CPU), with bin/sdpabench
# cross-compiled here (go build -o bin/sdpabench ./cmd/sdpabench; the cuda
# build works too). For 1 thread and all threads, ROUNDS times (default 3),
# it alternates ours (FP32, FP8) and PyTorch (FP32), in reversed order every
# other round, so that drifts in the machine's speed hit both sides alike;
# round 1 also validates ours against the oracle. Writes JSON per run and summary.txt (per-round ratios,
# their medians, and the ratio of each side's fastest round) under OUT (default ./out). On a shared
# machine, whose noise only ever slows a side down, the fastest rounds are the steadier estimate
# (docs/BENCHMARKS.md, "Method").
# THREADS (default "1 all") picks the thread counts; "all" is nproc.
# Usage: OUT=dir ROUNDS=3 [THREADS=1] scripts/cpu-side-by-side.sh [SHAPES]
set -uo pipefail
out=${OUT:-out}
shapes=${1:-2x8x256x256x64,1x8x1024x1024x64}
rounds=${ROUNDS:-3}
all=$(nproc)
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
grep -m1 "Model name" "$out/lscpu.txt"
threads=${THREADS:-1 all}
threads=${threads//all/$all}
for t in $threads; do
  for r in $(seq 1 "$rounds"); do
    check=-nocheck
    [ "$r" = 1 ] && check=
    ours() {
      for prec in "$@"; do
        GOMAXPROCS=$t bin/sdpabench -backend cpu -precision $prec -shapes "$shapes" $check \
          -json "$out/go-$prec-t$t-r$r.json" > "$out/go-$prec-t$t-r$r.log" 2>&1
        grep -E "FAIL" "$out/go-$prec-t$t-r$r.log"
      done
    }
    theirs() { python3 bench/torch_cpu_sdpa.py "$out/torch-t$t-r$r.json" "$t" "$shapes" > "$out/torch-t$t-r$r.log" 2>&1; }
    if [ $((r % 2)) = 1 ]; then ours fp32 fp8; theirs; else theirs; ours fp8 fp32; fi
  done
done
python3 - "$out" "$rounds" $threads <<'PY' | tee "$out/summary.txt"
import json, statistics, sys
out, rounds, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    return {r["shape"]: r for r in json.load(open(f"{out}/{name}.json"))}
print(f"{'shape':18s} {'threads':>7s} {'ours fp32':>10s} {'ours fp8':>10s} {'torch fp32':>10s} {'fp32 ratio':>10s} {'fp8 ratio':>10s}   (GFLOP/s per round; ratio = ours / torch, same round)")
for t in threads:
    rows = {}
    for r in range(1, rounds + 1):
        g32, g8, th = load(f"go-fp32-t{t}-r{r}"), load(f"go-fp8-t{t}-r{r}"), load(f"torch-t{t}-r{r}")
        for shape in th:
            a, b, c = g32[shape]["gflops"], g8[shape]["gflops"], th[shape]["gflops"]
            rows.setdefault(shape, []).append((a, b, c, a / c, b / c))
            print(f"{shape:18s} {t:>7s} {a:10.1f} {b:10.1f} {c:10.1f} {a/c:10.2f} {b/c:10.2f}   round {r}")
    for shape, v in rows.items():
        med = [statistics.median(x[i] for x in v) for i in range(5)]
        print(f"{shape:18s} {t:>7s} {med[0]:10.1f} {med[1]:10.1f} {med[2]:10.1f} {med[3]:10.2f} {med[4]:10.2f}   MEDIAN of {len(v)}")
        best = [max(x[i] for x in v) for i in range(3)]
        print(f"{shape:18s} {t:>7s} {best[0]:10.1f} {best[1]:10.1f} {best[2]:10.1f} {best[0]/best[2]:10.2f} {best[1]/best[2]:10.2f}   BEST of {len(v)} (each side's fastest round)")
PY
