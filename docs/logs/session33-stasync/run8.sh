#!/usr/bin/env bash
# Session 33, run 8: the quantizing form's fused step and the attention
# alone at 12 to 17 heads of the mission's rows (B1, S256, D64), the
# committed kernels (2d415f7's), three rounds: does the time step up past
# 15 heads, where a call's clusters of four no longer all fit beside the
# previous call's?
set -u
. scripts/gpu-lib.sh; unpack_bins
for r in 1 2 3; do
  FP8ATTN_QA_HEADS=12,14,15,16,17 bin/cuda.test -test.run XXX -test.bench 'DeviceQuantizeAttention/(mission/|heads)' -test.benchtime 2000x \
    > "$OUT/bench-r$r.txt" 2>&1
  echo "round $r:"; grep -E "^Benchmark" "$OUT/bench-r$r.txt" | awk '{n=$1; sub(/BenchmarkDeviceQuantizeAttention\//,"",n); for(i=3;i<=NF;i+=2) if ($(i+1)=="us/fused"||$(i+1)=="us/attention") printf "%s %s %s; ", n, $(i+1), $i; print ""}'
done
