#!/usr/bin/env bash
# Session 32, run 10: v20 as committed (run 9's h-all with its macros removed: the
# load addresses and score-factor parameters before pdl_wait, top pinned,
# the remainder step without copysign): gen.sh rebuilds the kernels; the new cubin's
# SASS against run 9's h-all build; the whole backend suite, the sdpa
# device tests and the three sanitizers on it; the broken builds; the
# stamps timeline; three rounds against the committed binary (old).
set -u
export OUT
mkdir -p /tmp/r6 && tar xzf docs/logs/session32-quant/run9/quantpack-ab.tgz -C /tmp/r6 ./h-all.cubin
GEN=1 FULL=1 SANITIZE=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="broken-v:-DFP8ATTN_QP_BROKEN_V=1 broken-qc:-DFP8ATTN_S9_BROKEN_QC=1 broken-quotient:-DFP8ATTN_QP_BROKEN_QUOTIENT=1 v20-stamps:-DFP8ATTN_QP_STAMPS=1" \
  OLD_BINS=old ROUNDS=3 timeout 560 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
f='^\s*$|Fatbin|code for|arch =|EF_CUDA|host =|compile_size|\.text'
cuobjdump -sass -fun fp8attn_stage9qo_d64 backend/cuda/kernels/attention_sm_90a.cubin | grep -vE "$f" > /tmp/new.sass
cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/r6/h-all.cubin | grep -vE "$f" > /tmp/plain.sass
cmp -s /tmp/new.sass /tmp/plain.sass && echo "v20: fp8attn_stage9qo_d64's SASS is run 9's h-all build's" || echo "v20: fp8attn_stage9qo_d64's SASS differs from run 9's h-all build ($(diff /tmp/new.sass /tmp/plain.sass | grep -c '^<') lines)"
git diff --stat -- backend/cuda/kernels | tail -3
