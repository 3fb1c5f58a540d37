# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# quant_pack9's V transpose with columns d+1 and d swapped (and d+3, d+2).
s/^        const int sel = e;$/        const int sel = e ^ 1;/
