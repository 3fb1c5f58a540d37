#!/usr/bin/env bash
# Session 32, run 8: the quantizing form's twelve load addresses computed
# before pdl_wait (FP8ATTN_QC_HOIST=1) against the same source without it
# (nohoist) and v20's cubin (base: run 7's gen.sh build, the working
# tree's), with the committed binary (old); the stamps timeline of hoist.
set -u
export OUT
VARIANTS="nohoist: hoist:-DFP8ATTN_QC_HOIST=1 hoist-stamps:-DFP8ATTN_QC_HOIST=1,-DFP8ATTN_QP_STAMPS=1" \
  OLD_BINS=old ROUNDS=3 timeout 480 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
mkdir -p /tmp/qa && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/qa
for n in base nohoist hoist; do
  cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/$n.cubin | gzip > "$OUT/qo-$n.sass.gz"
  echo "$n: $(zcat "$OUT/qo-$n.sass.gz" | grep -cE '/\*[0-9a-f]{4,}\*/') instructions; $(grep -A2 stage9qo /tmp/qa/$n-build.log 2>/dev/null | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' ')"
done | tee "$OUT/sizes.txt"
