#!/usr/bin/env bash
# Session 32, run 1: (a) loads.cu: the load phase's time by SMs a head and
# the clusters of 4 and 8 the GPU holds; (b) the SASS of the quantizing
# form, committed and with the encode's slow path out of line; (c) the
# out-of-line build A/B against the committed cubin (bit-exactness, graph
# replay, the stamps timeline).
set -u
export OUT
d=docs/logs/session32-quant
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/loads $d/loads.cu && /tmp/loads | tee "$OUT/loads.txt"
k=backend/cuda/kernels
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -DFP8ATTN_QC_OUTLINE=1 -o /tmp/outline.cubin attention_sm90a.cu) 2> "$OUT/outline-build.log"
grep -A3 "stage9qo" "$OUT/outline-build.log" | head -8
for c in $k/attention_sm_90a.cubin /tmp/outline.cubin; do
  n=$(basename $c .cubin)
  cuobjdump -sass $c > /tmp/$n.sass
  awk '/Function :/ {if (f) printf "%s %d\n", f, n; f=$3; n=0} /\/\*[0-9a-f]+\*\/ / {n++} END {printf "%s %d\n", f, n}' /tmp/$n.sass | tee "$OUT/sizes-$n.txt"
  cuobjdump -sass -fun fp8attn_stage9qo_d64 $c > "$OUT/qo-$n.sass"
done
gzip "$OUT"/*.sass
VARIANTS="rebuilt: outline:-DFP8ATTN_QC_OUTLINE=1 base-stamps:-DFP8ATTN_QP_STAMPS=1 outline-stamps:-DFP8ATTN_QC_OUTLINE=1,-DFP8ATTN_QP_STAMPS=1" \
  ROUNDS=3 timeout 420 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
