#!/usr/bin/env bash
# Session 25, run 3: v14 reverted; the kernels' shared-memory and amax helpers
# refactored (cluster_map, warp_amax, byte_column): rebuilt by gen.sh, the SASS
# compared with the committed cubin's, validated, timed against 55da4a4 (prev);
# then the D128 shape with and without programmatic dependent launch.
set -u
export OUT
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/committed.cubin
GEN=1 VARIANTS="broken-qc:-DFP8ATTN_S9_BROKEN_QC=1 broken-v:-DFP8ATTN_QP_BROKEN_V=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' SDPA_TESTS='Device|Graph|Cache|Conformance' FULL=1 \
  SANITIZE=1 OLD_BINS=prev ROUNDS=2 timeout 480 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
cuobjdump -sass /tmp/committed.cubin | grep -vE "^\s*$|code for|Function :|\.headerflags|\.section" > /tmp/old.sass
cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin | grep -vE "^\s*$|code for|Function :|\.headerflags|\.section" > /tmp/new.sass
echo "sass lines old $(wc -l < /tmp/old.sass) new $(wc -l < /tmp/new.sass), differing: $(diff /tmp/old.sass /tmp/new.sass | grep -c '^[<>]')"
diff /tmp/old.sass /tmp/new.sass | head -20 > "$OUT/sass-diff.txt"
. scripts/gpu-lib.sh; use_built_kernels
for pdl in 1 0 1 0; do
  FP8ATTN_PDL=$pdl bin/sdpabench -kernel stage9 -shapes 4x32x4096x4096x128 -nocheck -iters 20 2>&1 | grep graph | sed "s|^|pdl=$pdl D128: |"
done | tee "$OUT/pdl-d128.txt"
