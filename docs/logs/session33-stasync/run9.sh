#!/usr/bin/env bash
# Session 33, run 9: gen.sh builds v24 (the quantizing form's V addresses
# computed after pdl_wait, under the Q and K loads: FP8ATTN_S9_LATE_VSRC=1,
# the default); early is the same source computing them before pdl_wait
# (its SASS should be c33's); c33 is the committed binary (2616ce7) with
# its kernels. The whole backend suite, the sdpa device tests and the
# sanitizers on v24; the broken builds; stamps of both (entry time at the
# first instruction); three rounds; then both cubins at 15 and 16 heads.
set -u
export OUT
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/c33.cubin
GEN=1 FULL=1 SANITIZE=1 FP8ATTN_QP_BLOCKS=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="early:-DFP8ATTN_S9_LATE_VSRC=0 broken-qv:-DFP8ATTN_S9_BROKEN_QV=1 broken-amax:-DFP8ATTN_S9_BROKEN_AMAX=1 late-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1 early-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1,-DFP8ATTN_S9_LATE_VSRC=0" \
  OLD_BINS=c33 ROUNDS=3 timeout 500 bash scripts/quantpack-ab.sh > "$OUT/run9.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "^tests|^round|FAILED|^sdpa|^backend|^memcheck|^racecheck|^synccheck|^broken|_test.go:[0-9]+: \{" "$OUT/run9.txt" | head -40
grep -E "quantpack_timeline_test.go:(126|139|156)" "$OUT/run9.txt" | awk '$2 != "SM" || $4 > -2' | grep -vE "softmax|tile done|codes|copies|consumer|amax"
mkdir -p /tmp/w && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/w
for r in 1 2; do for n in base early; do
  FP8ATTN_QA_HEADS=15,16 FP8ATTN_CUBIN=/tmp/w/$n.cubin bin/cuda.test -test.run XXX -test.bench 'DeviceQuantizeAttention/heads' -test.benchtime 2000x > "$OUT/heads-$n-r$r.txt" 2>&1
  echo "heads round $r $n: $(grep -E '^Benchmark' "$OUT/heads-$n-r$r.txt" | grep -oE 'heads-[0-9]+|[0-9.]+ us/fused' | tr '\n' ' ')"
done; done
cuobjdump -sass /tmp/w/early.cubin > /tmp/e.sass; cuobjdump -sass /tmp/c33.cubin > /tmp/c.sass
echo "early against c33: $(python3 docs/logs/session33-stasync/sass_compare.py /tmp/c.sass /tmp/e.sass)"
