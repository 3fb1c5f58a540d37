#!/usr/bin/env bash
# Session 32, run 11: v21, the quantizing form's V taken by the producer
# warpgroup alone after Q and K (its loads issued after theirs, its amax
# exchanged apart, its encode and copies beside the consumer's Q·Kᵀ and
# softmax): gen.sh builds it; the bit-exactness, encode and concurrency
# tests and the three sanitizers on it; the broken builds (broken-qv: each
# block's own V scale); the stamps timeline; three rounds against v20
# (the binary of 9282724 with its embedded kernels).
set -u
export OUT
GEN=1 SANITIZE=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="broken-qv:-DFP8ATTN_S9_BROKEN_QV=1 broken-qc:-DFP8ATTN_S9_BROKEN_QC=1 v21-stamps:-DFP8ATTN_QP_STAMPS=1" \
  OLD_BINS=v20 ROUNDS=3 timeout 560 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
grep -A3 "stage9qo" "$OUT/gen.log" backend/cuda/kernels/sm90a_build.log 2>/dev/null | grep -E "registers|spill|stack" | head -4
grep -E "stage9qo" backend/cuda/kernels/resources.txt
