#!/usr/bin/env bash
# Session 32, run 15: the score factor's parameters copied to shared memory
# at the set-up (sf-smem), on top of the late V loads (lv); the SASS of the
# lv-sfs build's consumer start; stamps timelines.
set -u
export OUT
VARIANTS="lv:-DFP8ATTN_QC_LATE_V=1 lv-sfs:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QC_SF_SMEM=1 \
lv-sfs-stamps:-DFP8ATTN_QC_LATE_V=1,-DFP8ATTN_QC_SF_SMEM=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|ConcurrentCalls' OLD_BINS=none ROUNDS=3 timeout 500 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
mkdir -p /tmp/qa && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/qa ./lv-sfs.cubin
cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/lv-sfs.cubin | grep -E '/\*[0-9a-f]{4,}\*/' | sed -E 's#^\s*/\*([0-9a-f]+)\*/\s*#\1 #; s#\s*/\*.*##; s#\s+;#;#' > /tmp/qo.txt
awk '/UBLKCP/ {f=1} f {print} /QGMMA/ && f {exit}' /tmp/qo.txt > "$OUT/qo-lv-sfs-consumer-start.txt"
grep -c "c\[0x0\]\[0x30" /tmp/qo.txt
