#!/usr/bin/env bash
# Session 33, run 1: first the racecheck session 32 left (v23, the
# committed cubin embedded in bin/v23-cuda.test, run 11's failing seed);
# then gen.sh builds v24 (K's shares by st.async, FP8ATTN_S9_K_STASYNC=1,
# the default); the bit-exactness, encode and concurrency tests on it and
# on the variants; the broken build (quad transpose skipped) must fail;
# the stamps timeline; three rounds against kcopy (the same source with
# session 32's bulk copies) and v23 (the committed binary).
set -u
export OUT
. scripts/gpu-lib.sh; unpack_bins
FP8ATTN_SEED=1795491053995319535 timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 bin/v23-cuda.test \
  -test.run AttentionQuantizingBitExact > "$OUT/racecheck-seed-v23.txt" 2>&1
echo "v23 racecheck on run 11's failing seed: rc $? $(grep SUMMARY "$OUT/racecheck-seed-v23.txt")"
GEN=1 TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="kcopy:-DFP8ATTN_S9_K_STASYNC=0 broken-kt:-DFP8ATTN_S9_BROKEN_KT=1 v24-stamps:-DFP8ATTN_QP_STAMPS=1 kcopy-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_S9_K_STASYNC=0" \
  OLD_BINS=v23 ROUNDS=3 timeout 380 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
grep -E "stage9qo" backend/cuda/kernels/resources.txt
