#!/usr/bin/env bash
# Session 33, run 5: the parameter prefetch with a real use (thread 0
# stores the XOR of the words into shared memory; run 3's empty-asm form
# was dropped by ptxas). pf is this tree's source (FP8ATTN_S9_PARAM_PREFETCH=1);
# base is run 2's cubin (no prefetch). The bit-exactness test on pf; its
# stamps build with the entry stamp at the first instruction (1) and after
# the prefetch (3); three rounds of pf against base.
set -u
export OUT
FP8ATTN_QP_BLOCKS=1 TESTS='AttentionQuantizingBitExact' \
  VARIANTS="pf: pf-first-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 pf-after-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=3" \
  ROUNDS=3 OLD_BINS=none timeout 300 bash scripts/quantpack-ab.sh > "$OUT/run5.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "^tests|^round|FAILED" "$OUT/run5.txt"
grep -E "quantpack_timeline_test.go:(126|139|156)" "$OUT/run5.txt" | awk '$2 != "SM" || $4 > -2' | grep -vE "softmax|tile done|codes|copies|consumer|K shares|amax"
mkdir -p /tmp/w && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/w && cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/w/pf.cubin | grep -E "LDC|STS|ACQBULK" | head -24
