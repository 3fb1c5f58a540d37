#!/usr/bin/env bash
# Session 25, run 4: where the mission call's 3.4 us goes, by diagnostic builds
# (wrong by design, timed only): no output stores; no arithmetic (tiles waited
# for, zeros stored); neither. Then the call with programmatic dependent launch off.
set -u
export OUT
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/committed.cubin
GEN=1 VARIANTS="diag-nostore:-DFP8ATTN_S9_DIAG_NOSTORE=1 diag-nocompute:-DFP8ATTN_S9_DIAG_NOCOMPUTE=1 diag-both:-DFP8ATTN_S9_DIAG_NOSTORE=1,-DFP8ATTN_S9_DIAG_NOCOMPUTE=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=prev ROUNDS=3 timeout 400 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $? (the diag builds fail the tests by design)"
cmp /tmp/committed.cubin backend/cuda/kernels/attention_sm_90a.cubin && echo "gen.sh's cubin is the committed one, byte for byte"
. scripts/gpu-lib.sh; use_built_kernels
for pdl in 1 0 1 0; do
  FP8ATTN_PDL=$pdl bin/cuda.test -test.run '^$' -test.bench DeviceQuantizeAttention -test.benchtime 2000x 2>&1 |
    grep -oE '[0-9.]+ us/(attention|fused)' | tr '\n' ' ' | sed "s|^|pdl=$pdl: |"; echo
done | tee "$OUT/pdl-mission.txt"
