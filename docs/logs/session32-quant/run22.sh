#!/usr/bin/env bash
# Session 32, run 22: whole-sector Q and K loads (FP8ATTN_QC_SECTORS) on
# v22 (base, the committed cubin), plain (the source without it), and the
# stamps timeline of sectors.
set -u
export OUT
VARIANTS="plain: sectors:-DFP8ATTN_QC_SECTORS=1 sectors-stamps:-DFP8ATTN_QC_SECTORS=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=none ROUNDS=3 timeout 300 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
