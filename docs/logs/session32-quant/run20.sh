#!/usr/bin/env bash
# Session 32, run 20: K's copies issued by lane 0 of three producer warps
# (one copy a warp) instead of three lanes of the consumer's first warp
# (copy-warps), with its stamps timeline; base is the committed v22 cubin.
set -u
export OUT
VARIANTS="copy-warps:-DFP8ATTN_QC_COPY_WARPS=1 copy-warps-stamps:-DFP8ATTN_QC_COPY_WARPS=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=none ROUNDS=3 timeout 300 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
