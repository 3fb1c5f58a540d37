#!/usr/bin/env bash
# Session 32, run 6: run 5 found the plain rebuild of the reworked source
# (no option) 0.2 us faster than the committed cubin, and the whole-sector
# loads slower than it. Here, without the sector loads: top pinned
# (p-pin), the rolled slow encode (p-compact), both (p-pc), the broken
# slow path, and the stamps timelines of plain and p-pc.
set -u
export OUT
VARIANTS="plain: p-pin:-DFP8ATTN_QC_PIN_TOP=1 p-compact:-DFP8ATTN_QC_COMPACT=1 p-pc:-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_COMPACT=1 \
broken-slow:-DFP8ATTN_QC_COMPACT=1,-DFP8ATTN_QC_BROKEN_SLOW=1 \
plain-stamps:-DFP8ATTN_QP_STAMPS=1 p-pc-stamps:-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_COMPACT=1,-DFP8ATTN_QP_STAMPS=1" \
  ROUNDS=3 timeout 480 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
mkdir -p /tmp/qa && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/qa
for n in base plain p-pin p-compact p-pc; do
  echo "$n: fp8attn_stage9qo_d64 $(cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/$n.cubin | grep -cE '/\*[0-9a-f]{4,}\*/') instructions"
  cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/$n.cubin | gzip > "$OUT/qo-$n.sass.gz"
done | tee "$OUT/sizes.txt"
