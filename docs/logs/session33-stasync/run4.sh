#!/usr/bin/env bash
# Session 33, run 4: where the late clusters' first microsecond goes. The
# stamps build with the entry stamp after prefetch_params (3) beside the
# first instruction (1), every block listed, two launches of the timeline
# each. No gen.sh: the variants are built from this tree's source.
set -u
export OUT
FP8ATTN_QP_BLOCKS=1 TESTS='AttentionQuantizingBitExact' \
  VARIANTS="first-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 pf-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=3 pf2-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=3 src-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=2" \
  ROUNDS=0 OLD_BINS=none timeout 300 bash scripts/quantpack-ab.sh > "$OUT/run4.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "quantpack_timeline_test.go:(126|139|156)" "$OUT/run4.txt" | awk '$2 != "SM" || $4 > -2' | grep -vE "softmax|tile done|codes|copies|consumer|K shares|amax"
