#!/usr/bin/env bash
# Session 33, run 3: gen.sh builds v24 (the quantizing form's parameters
# prefetched, FP8ATTN_S9_PARAM_PREFETCH=1, the default); the bit-exactness,
# encode and concurrency tests on it and on nopf (the same source without
# the prefetch: run 2's kernels); the stamps builds of both with the entry
# stamp at the first instruction, every block listed; three rounds against
# nopf and v23 (the committed binary).
set -u
export OUT
GEN=1 FP8ATTN_QP_BLOCKS=1 TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="nopf:-DFP8ATTN_S9_PARAM_PREFETCH=0 pf-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 nopf-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1,-DFP8ATTN_S9_PARAM_PREFETCH=0" \
  OLD_BINS=v23 ROUNDS=3 timeout 400 bash scripts/quantpack-ab.sh > "$OUT/run3.txt" 2>&1
echo "quantpack-ab rc $?"
grep -vE "quantpack_timeline_test.go:156" "$OUT/run3.txt" | tail -45
grep -E "quantpack_timeline_test.go:(126|156)" "$OUT/run3.txt" | awk '$2 != "SM" || $4 > -2' 
grep -E "stage9qo" backend/cuda/kernels/resources.txt
