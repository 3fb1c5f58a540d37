#!/usr/bin/env bash
# Runs our CPU backend and PyTorch's CPU SDPA side by side in one run, on a
# machine with PyTorch and no Go (the GPU machine's CPU), with bin/sdpabench
# cross-compiled here (GOOS=linux GOARCH=amd64 go build -o bin/sdpabench
# ./cmd/sdpabench). For 1 thread and all threads it alternates: ours FP32,
# ours FP8, PyTorch FP32. Results (JSON, logs) go under OUT (default ./out).
# Usage: OUT=dir scripts/cpu-side-by-side.sh [SHAPES]
set -uo pipefail
out=${OUT:-out}
shapes=${1:-2x8x256x256x64,1x8x1024x1024x64}
all=$(nproc)
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
grep -m1 "Model name" "$out/lscpu.txt"
for t in 1 "$all"; do
  for prec in fp32 fp8; do
    GOMAXPROCS=$t bin/sdpabench -backend cpu -precision $prec -shapes "$shapes" -json "$out/go-$prec-t$t.json" \
      > "$out/go-$prec-t$t.log" 2>&1
    grep -E "GFLOP/s|FAIL" "$out/go-$prec-t$t.log" | sed "s/^/ours $prec t=$t: /"
  done
  python3 bench/torch_cpu_sdpa.py "$out/torch-cpu-t$t.json" "$t" "$shapes" 2>&1 | grep -v Warning
done
