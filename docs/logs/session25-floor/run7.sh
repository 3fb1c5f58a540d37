#!/usr/bin/env bash
# Session 25, run 7 (review): amax4 and top4 shared by quant_pack9, Encoder::fast4
# and the quantizing form: rebuilt by gen.sh, the SASS compared with the committed
# cubin's, validated (the whole backend suite, the sdpa tests, the encode over every
# float, two broken builds), timed against the committed cubin (prev: this tree's test binary, its kernels embedded).
set -u
export OUT
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/committed.cubin
GEN=1 VARIANTS="broken-qc:-DFP8ATTN_S9_BROKEN_QC=1 broken-quotient:-DFP8ATTN_QP_BROKEN_QUOTIENT=1" \
  TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' SDPA_TESTS='Device|Graph|Cache|Conformance' FULL=1 \
  ROUNDS=2 OLD_BINS=prev timeout 300 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
cuobjdump -sass /tmp/committed.cubin | grep -vE "^\s*$|\.headerflags|\.section" > /tmp/old.sass
cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin | grep -vE "^\s*$|\.headerflags|\.section" > /tmp/new.sass
echo "sass lines old $(wc -l < /tmp/old.sass) new $(wc -l < /tmp/new.sass), differing: $(diff /tmp/old.sass /tmp/new.sass | grep -c '^[<>]')"
diff /tmp/old.sass /tmp/new.sass | grep -E "Function|^[<>]" | head -40 > "$OUT/sass-diff.txt"
cmp -s /tmp/committed.cubin backend/cuda/kernels/attention_sm_90a.cubin && echo "cubin byte-identical"
