#!/usr/bin/env bash
# Session 33, run 2: gen.sh builds the tree with st.async taken out again
# (session 32's bulk copies) and v20's ignored parameter hoist removed;
# its SASS against the committed cubin's (v23), function by function; the
# backend suite, the sdpa device tests and the sanitizers where a function
# changed; then where the mission call's late blocks lose their time: the
# stamps build with the entry stamp at the kernel's first instruction (1)
# and after the parameters are read (2), every block listed; two rounds
# against v23.
set -u
export OUT
name=run2
. scripts/gpu-lib.sh; unpack_bins
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/v23.cubin
build_kernels || { tail -30 "$OUT/gen.log"; exit 1; }
cuobjdump -sass /tmp/v23.cubin > /tmp/v23.sass; cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin > /tmp/new.sass
python3 docs/logs/session33-stasync/sass_compare.py /tmp/v23.sass /tmp/new.sass | tee "$OUT/sass-compare.txt"
extra=""
grep -q " 0 differ" "$OUT/sass-compare.txt" || extra="FULL=1 SANITIZE=1"
env $extra FP8ATTN_QP_BLOCKS=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="first-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 params-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=2" \
  OLD_BINS=v23 ROUNDS=2 timeout 480 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
