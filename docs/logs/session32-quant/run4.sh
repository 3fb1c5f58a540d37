#!/usr/bin/env bash
# Session 32, run 4: on top of the whole-sector loads, three more A/B
# variants of the quantizing form: top pinned before the exchange
# (FP8ATTN_QC_PIN_TOP), the score factor's parameters read before
# pdl_wait (FP8ATTN_QC_WARM), the slow encode rolled (FP8ATTN_QC_COMPACT),
# and all three; a plain rebuild whose SASS must equal the committed
# cubin's; the broken slow path; the stamps timeline of all three.
set -u
export OUT
S=-DFP8ATTN_QC_SECTORS=1
VARIANTS="plain: sectors:$S s-pin:$S,-DFP8ATTN_QC_PIN_TOP=1 s-warm:$S,-DFP8ATTN_QC_WARM=1 s-compact:$S,-DFP8ATTN_QC_COMPACT=1 \
s-all:$S,-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_WARM=1,-DFP8ATTN_QC_COMPACT=1 \
broken-slow:$S,-DFP8ATTN_QC_COMPACT=1,-DFP8ATTN_QC_BROKEN_SLOW=1 \
s-all-stamps:$S,-DFP8ATTN_QC_PIN_TOP=1,-DFP8ATTN_QC_WARM=1,-DFP8ATTN_QC_COMPACT=1,-DFP8ATTN_QP_STAMPS=1" \
  ROUNDS=3 timeout 480 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
mkdir -p /tmp/qa && tar xzf "$OUT/quantpack-ab.tgz" -C /tmp/qa
cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin | grep -vE "^\s*$|Fatbin|code for|arch =|EF_CUDA|host =|compile_size|\.text" > /tmp/committed.sass
cuobjdump -sass /tmp/qa/plain.cubin | grep -vE "^\s*$|Fatbin|code for|arch =|EF_CUDA|host =|compile_size|\.text" > /tmp/plain.sass
cmp -s /tmp/committed.sass /tmp/plain.sass && echo "plain: SASS the committed cubin's, every function" || echo "plain: SASS differs from the committed cubin's"
for n in sectors s-pin s-warm s-compact s-all; do
  echo "$n: fp8attn_stage9qo_d64 $(cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/$n.cubin | grep -cE '/\*[0-9a-f]{4,}\*/') instructions; $(grep -A2 stage9qo /tmp/qa/$n-build.log | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes stack frame|[0-9]+ bytes spill stores' | tr '\n' ' ')"
done | tee "$OUT/sizes.txt"
cuobjdump -sass -fun fp8attn_stage9qo_d64 /tmp/qa/s-all.cubin | gzip > "$OUT/qo-s-all.sass.gz"
