#!/usr/bin/env bash
# Session 33, run 10: gen.sh builds v24 (the quantizing form's V addresses
# from one per thread plus constant key offsets, no branches, before
# pdl_wait as before: the default); late is the same with them computed
# after pdl_wait (FP8ATTN_S9_LATE_VSRC=1); c33 is the committed binary
# (2616ce7) with its kernels. The whole backend suite, the sdpa device
# tests and the sanitizers on v24; the broken builds (V's keys 8 and 9
# swapped must fail); stamps of v24; three rounds; both at 15 and 16 heads.
set -u
export OUT
GEN=1 FULL=1 SANITIZE=1 FP8ATTN_QP_BLOCKS=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="late:-DFP8ATTN_S9_LATE_VSRC=1 broken-vsrc:-DFP8ATTN_S9_BROKEN_VSRC=1 broken-qv:-DFP8ATTN_S9_BROKEN_QV=1 v24-stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1" \
  OLD_BINS=c33 ROUNDS=3 timeout 500 bash scripts/quantpack-ab.sh > "$OUT/run10.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "^tests|^round|FAILED|^sdpa|^backend|^memcheck|^racecheck|^synccheck|^broken|_test.go:[0-9]+: \{" "$OUT/run10.txt" | head -40
grep -E "quantpack_timeline_test.go:(126|139|156)" "$OUT/run10.txt" | awk '$2 != "SM" || $4 > -2' | grep -vE "tile done|codes|copies|consumer"
mkdir -p /tmp/w && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/w
for r in 1 2; do for n in base late; do
  FP8ATTN_QA_HEADS=15,16 FP8ATTN_CUBIN=/tmp/w/$n.cubin bin/cuda.test -test.run XXX -test.bench 'DeviceQuantizeAttention/heads' -test.benchtime 2000x > "$OUT/heads-$n-r$r.txt" 2>&1
  echo "heads round $r $n: $(grep -E '^Benchmark' "$OUT/heads-$n-r$r.txt" | grep -oE 'heads-[0-9]+|[0-9.]+ us/fused' | tr '\n' ' ')"
done; done
grep -E "stage9qo" backend/cuda/kernels/resources.txt
