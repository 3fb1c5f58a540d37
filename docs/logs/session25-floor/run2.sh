#!/usr/bin/env bash
# Session 25, run 2: kernel changelog v14 (the split one-tile form) built by gen.sh,
# validated (tests, sanitizers, two broken builds that must fail), timed against
# the binaries of 55da4a4 (prev: v13's kernels embedded), and at 32..256 query blocks.
set -u
export OUT
GEN=1 VARIANTS="minb1:-DFP8ATTN_S9_SPLIT_MINB=1 broken-split:-DFP8ATTN_S9_BROKEN_SPLIT=1 broken-one:-DFP8ATTN_S9_BROKEN_ONE=1" \
  TESTS='AttentionQuantizingBitExact|Conformance|FP8PAccuracy|ConcurrentCalls' SDPA_TESTS='Device|Graph|Cache' \
  SANITIZE=1 SANITIZE_TESTS='AttentionQuantizingBitExact' OLD_BINS=prev ROUNDS=3 timeout 420 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
grep -A4 -E "Compiling entry function .fp8attn_stage9(f|q)?o_d64" backend/cuda/kernels/sm90a_build.log | grep -E "entry|Used|spill|stack"
. scripts/gpu-lib.sh; use_built_kernels
for r in 1 2; do for s in 1x8x256x256x64 2x8x256x256x64 4x8x256x256x64 8x8x256x256x64; do
  for b in sdpabench prev-sdpabench; do
    if [ $b = prev-sdpabench ]; then pre="env -u FP8ATTN_CUBIN"; else pre=env; fi
    $pre bin/$b -kernel stage9 -shapes $s -iters 2000 2>&1 | grep -E "check|graph" | grep -v "check:" | sed "s|^|r$r $b $s: |"
  done
done; done 2>&1 | tee "$OUT/blocks.txt"
