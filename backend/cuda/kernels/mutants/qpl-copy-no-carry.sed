# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# quant_pack9's long form stepping its copies' source addresses without
# the row carry (copy_chunk): at D 96 and 192, whose rows do not divide a
# step, the copies after the first carry read the wrong values.
s/^      if (c >= D) c -= D, a += carry;$/      if (c >= D) c -= D;/
