#!/usr/bin/env bash
# Session 32, run 18: the bit-exactness test with a case of non-finite
# inputs (±Inf and NaN in Q, K and V) on the quantizing form; gen.sh
# rebuilds the kernels after FP8ATTN_S9_BROKEN_TOP was added (the cubin
# must come out byte for byte the committed one); the broken build, which
# encodes ±Inf through the straight path, must fail the new case.
set -u
export OUT
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/committed.cubin
cp backend/cuda/kernels/attention_compute_90a.ptx /tmp/committed.ptx
GEN=1 VARIANTS="broken-top:-DFP8ATTN_S9_BROKEN_TOP=1 broken-qv:-DFP8ATTN_S9_BROKEN_QV=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls|FastEncodeAllFloats' OLD_BINS=none ROUNDS=1 timeout 400 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
cmp /tmp/committed.cubin backend/cuda/kernels/attention_sm_90a.cubin && echo "cubin: byte for byte the committed one"
cmp /tmp/committed.ptx backend/cuda/kernels/attention_compute_90a.ptx && echo "compute_90a PTX: byte for byte the committed one"
. scripts/gpu-lib.sh; use_built_kernels
bin/cuda.test -test.run 'AttentionQuantizingBitExact' -test.count 5 -test.v > "$OUT/bitexact5.txt" 2>&1; echo "5 repeats: rc $? $(tail -1 "$OUT/bitexact5.txt")"
