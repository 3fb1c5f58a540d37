#!/usr/bin/env bash
# Session 32, run 17: the consumer's code in the quantizing form (v22)
# against the images' one-tile form: SASS instructions from the first
# wgmma to the end, by kind.
set -u
export OUT
c=backend/cuda/kernels/attention_sm_90a.cubin
for fn in fp8attn_stage9qo_d64 fp8attn_stage9o_d64 fp8attn_stage9fo_d64; do
  cuobjdump -sass -fun $fn $c | grep -E '/\*[0-9a-f]{4,}\*/' | sed -E 's#^\s*/\*([0-9a-f]+)\*/\s*#\1 #; s#\s*/\*.*##; s#\s+;#;#' > /tmp/$fn.txt
  awk '/QGMMA/ {f=1} f' /tmp/$fn.txt > /tmp/$fn.tail
  echo "$fn: $(wc -l < /tmp/$fn.txt) instructions, $(wc -l < /tmp/$fn.tail) from the first QGMMA"
  awk '{op=$2; if (op ~ /^@/) op=$3; sub(/\..*/, "", op); n[op]++} END {for (o in n) printf "%s=%d ", o, n[o]; print ""}' /tmp/$fn.tail | tr ' ' '\n' | sort -t= -k2 -nr | head -14 | tr '\n' ' '; echo
done | tee "$OUT/consumer-sass.txt"
