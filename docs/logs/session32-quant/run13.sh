#!/usr/bin/env bash
# Session 32, run 13: on v21 (base, the committed cubin): the producer's V
# loads issued after Q's and K's have arrived (late-v), K encoded and its
# copies issued before Q is encoded (k-first), both, and the source
# rebuilt without either (plain); stamps timelines of late-v and both.
set -u
export OUT
VARIANTS="plain: late-v:-DFP8ATTN_QC_LATE_V=1 k-first:-DFP8ATTN_QC_K_FIRST=1 both:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QC_K_FIRST=1 \
late-v-stamps:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QP_STAMPS=1 both-stamps:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QC_K_FIRST=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=none ROUNDS=3 timeout 500 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
