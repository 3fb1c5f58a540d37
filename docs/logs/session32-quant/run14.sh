#!/usr/bin/env bash
# Session 32, run 14: the SASS of v21's quantizing form (the committed
# cubin) from the K copies to the first wgmma, and around its setmaxnreg;
# the consumer's setmaxnreg after its prologue (late-inc), with and
# without the late V loads; stamps timelines of both.
set -u
export OUT
c=backend/cuda/kernels/attention_sm_90a.cubin
cuobjdump -sass -fun fp8attn_stage9qo_d64 $c | grep -E '/\*[0-9a-f]{4,}\*/' | sed -E 's#^\s*/\*([0-9a-f]+)\*/\s*#\1 #; s#\s*/\*.*##; s#\s+;#;#' > /tmp/qo.txt
awk '/UBLKCP/ {f=1} f {print} /QGMMA/ && f {exit}' /tmp/qo.txt > "$OUT/qo-v21-consumer-start.txt"
grep -n -B12 -A4 "USETMAXREG" /tmp/qo.txt > "$OUT/qo-v21-setmaxnreg.txt"
wc -l "$OUT"/qo-v21-*.txt
VARIANTS="late-v:-DFP8ATTN_QC_LATE_V=1 late-inc:-DFP8ATTN_QC_LATE_INC=1 lv-li:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QC_LATE_INC=1 \
late-inc-stamps:-DFP8ATTN_QC_LATE_INC=1,-DFP8ATTN_QP_STAMPS=1 lv-li-stamps:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QC_LATE_INC=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=none ROUNDS=3 timeout 500 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
