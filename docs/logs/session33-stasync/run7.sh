#!/usr/bin/env bash
# Session 33, run 7: gen.sh builds v24 (the quantizing form's parameters
# read by its second warp first thing, by ld.param of one word a 64-byte
# line: FP8ATTN_S9_PARAM_PREFETCH=1, the default); nopf is the same source
# without it; c33 is the committed binary (2d415f7) with its kernels. The
# whole backend suite, the sdpa device tests and the sanitizers on v24;
# stamps of both with the entry time at the first instruction; three
# rounds.
set -u
export OUT
GEN=1 FULL=1 SANITIZE=1 FP8ATTN_QP_BLOCKS=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="nopf:-DFP8ATTN_S9_PARAM_PREFETCH=0 pf-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 nopf-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1,-DFP8ATTN_S9_PARAM_PREFETCH=0" \
  OLD_BINS=c33 ROUNDS=3 timeout 540 bash scripts/quantpack-ab.sh > "$OUT/run7.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "^tests|^round|FAILED|^sdpa|^backend|^memcheck|^racecheck|^synccheck" "$OUT/run7.txt"
grep -E "quantpack_timeline_test.go:(126|139|156)" "$OUT/run7.txt" | awk '$2 != "SM" || $4 > -2' | grep -vE "softmax|tile done|codes|copies|consumer|amax"
mkdir -p /tmp/w && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/w && cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/w/base.cubin | grep -E "LDC|STS" | head -12
