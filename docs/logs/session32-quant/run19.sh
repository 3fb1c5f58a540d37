#!/usr/bin/env bash
# Session 32, run 19: the bit-exactness test with a case of non-finite
# inputs (±Inf and NaN in Q, K and V) on the quantizing form; gen.sh
# rebuilds the kernels after FP8ATTN_S9_BROKEN_AMAX was added (the cubin
# must come out byte for byte the committed one); the broken build, which
# counts the magnitudes of non-finite values into the amax, must fail the
# new case. (Run 18's broken-top build passed: an infinity on the straight
# path still encodes as a NaN code, through the remainder step, so no
# output shows it; that macro is gone.)
set -u
export OUT
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/committed.cubin
cp backend/cuda/kernels/attention_compute_90a.ptx /tmp/committed.ptx
GEN=1 VARIANTS="broken-amax:-DFP8ATTN_S9_BROKEN_AMAX=1 broken-qv:-DFP8ATTN_S9_BROKEN_QV=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls|FastEncodeAllFloats' OLD_BINS=none ROUNDS=1 timeout 400 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
cmp /tmp/committed.cubin backend/cuda/kernels/attention_sm_90a.cubin && echo "cubin: byte for byte the committed one"
cmp /tmp/committed.ptx backend/cuda/kernels/attention_compute_90a.ptx && echo "compute_90a PTX: byte for byte the committed one"
. scripts/gpu-lib.sh; use_built_kernels
bin/cuda.test -test.run 'AttentionQuantizingBitExact' -test.count 5 -test.v > "$OUT/bitexact5.txt" 2>&1; echo "5 repeats: rc $? $(tail -1 "$OUT/bitexact5.txt")"
