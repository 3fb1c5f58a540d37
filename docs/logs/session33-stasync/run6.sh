#!/usr/bin/env bash
# Session 33, run 6: gen.sh builds this tree (the stamps builds' entry time
# kept in a register and stored after pdl_wait, so that no global store
# precedes the set-up's MEMBAR.ALL.CTA); its SASS against run 2's cubin
# (the committed candidate; the default build should not change); the
# bit-exactness test; the stamps builds with the entry time at the first
# instruction (1), after the set-up (0) and after the parameters (2).
set -u
export OUT
name=run6
. scripts/gpu-lib.sh; unpack_bins
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/run2.cubin
build_kernels || { tail -30 "$OUT/gen.log"; exit 1; }
cuobjdump -sass /tmp/run2.cubin > /tmp/a.sass; cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin > /tmp/b.sass
python3 docs/logs/session33-stasync/sass_compare.py /tmp/a.sass /tmp/b.sass | tee "$OUT/sass-compare.txt"
FP8ATTN_QP_BLOCKS=1 TESTS='AttentionQuantizingBitExact' \
  VARIANTS="first-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 setup-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=0 src-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=2" \
  ROUNDS=0 OLD_BINS=none timeout 300 bash scripts/quantpack-ab.sh > "$OUT/run6.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "^tests|FAILED" "$OUT/run6.txt"
grep -E "quantpack_timeline_test.go:(126|139|156)" "$OUT/run6.txt" | awk '$2 != "SM" || $4 > -2' | grep -vE "softmax|tile done|codes|copies|consumer|amax"
