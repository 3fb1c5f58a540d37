#!/usr/bin/env bash
# Session 32, run 5: run 4 again with the builds that failed to compile
# there (a member used under a runtime condition): on top of the
# whole-sector loads, top pinned (s-pin), the rolled slow encode
# (s-compact), both (s-pc), the plain rebuild (SASS against the committed
# cubin), the broken slow path, and the stamps timelines of sectors and s-pc.
set -u
export OUT
S=-DFP8ATTN_QC_SECTORS=1
VARIANTS="plain: sectors:$S s-pin:$S,-DFP8ATTN_QC_PIN_TOP=1 s-compact:$S,-DFP8ATTN_QC_COMPACT=1 \
s-pc:$S,-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_COMPACT=1 \
broken-slow:$S,-DFP8ATTN_QC_COMPACT=1,-DFP8ATTN_QC_BROKEN_SLOW=1 \
sectors-stamps:$S,-DFP8ATTN_QP_STAMPS=1 s-pc-stamps:$S,-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_COMPACT=1,-DFP8ATTN_QP_STAMPS=1" \
  ROUNDS=3 timeout 480 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
mkdir -p /tmp/qa && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/qa
f='^\s*$|Fatbin|code for|arch =|EF_CUDA|host =|compile_size|\.text'
cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin | grep -vE "$f" > /tmp/committed.sass
cuobjdump -sass /tmp/qa/plain.cubin | grep -vE "$f" > /tmp/plain.sass
cmp -s /tmp/committed.sass /tmp/plain.sass && echo "plain: SASS the committed cubin's, every function" || { echo "plain: SASS differs from the committed cubin's"; diff /tmp/committed.sass /tmp/plain.sass | head -20; }
for n in sectors s-pin s-compact s-pc; do
  echo "$n: fp8attn_stage9qo_d64 $(cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/$n.cubin | grep -cE '/\*[0-9a-f]{4,}\*/') instructions; $(grep -A2 stage9qo /tmp/qa/$n-build.log | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes stack frame|[0-9]+ bytes spill stores' | tr '\n' ' ')"
done | tee "$OUT/sizes.txt"
cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/s-pc.cubin | gzip > "$OUT/qo-s-pc.sass.gz"
