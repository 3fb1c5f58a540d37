#!/usr/bin/env bash
# Session 32, run 21: V loaded with Q and K and its amax taken and sent by
# the producer before the Q and K encode (early, FP8ATTN_QC_EARLY_VAMAX), so
# that V's encode ends before the consumer's softmax starts; plain (the
# reworked source without it); stamps timeline of early; base is v22.
set -u
export OUT
VARIANTS="plain: early:-DFP8ATTN_QC_EARLY_VAMAX=1 early-stamps:-DFP8ATTN_QC_EARLY_VAMAX=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=none ROUNDS=3 timeout 300 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
