#!/usr/bin/env bash
# Session 32, run 9: on top of the hoisted load addresses (hoist), the
# quotient without copysign (h-negrem, FP8ATTN_QP_NEGREM), top pinned
# before the exchange (h-pin), the score factor's parameters read before
# pdl_wait (h-sf), all three (h-all), and the stamps timeline of h-all;
# base is the committed cubin.
set -u
export OUT
H=-DFP8ATTN_QC_HOIST=1
VARIANTS="hoist:$H h-negrem:$H,-DFP8ATTN_QP_NEGREM=1 h-pin:$H,-DFP8ATTN_QC_PIN_TOP=1 h-sf:$H,-DFP8ATTN_QC_HOIST_SF=1 \
h-all:$H,-DFP8ATTN_QP_NEGREM=1,-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_HOIST_SF=1 \
h-all-stamps:$H,-DFP8ATTN_QP_NEGREM=1,-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_HOIST_SF=1,-DFP8ATTN_QP_STAMPS=1" \
  TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats' ROUNDS=3 timeout 540 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
mkdir -p /tmp/qa && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/qa
for n in hoist h-negrem h-pin h-sf h-all; do
  cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/$n.cubin | gzip > "$OUT/qo-$n.sass.gz"
  echo "$n: $(zcat "$OUT/qo-$n.sass.gz" | grep -cE '/\*[0-9a-f]{4,}\*/') instructions; $(grep -A2 stage9qo /tmp/qa/$n-build.log 2>/dev/null | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' ')"
done | tee "$OUT/sizes.txt"
