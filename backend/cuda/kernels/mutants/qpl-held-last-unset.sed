# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# quant_pack9's long form never storing the last value it holds in shared
# memory (the encode reads whatever was there).
s/^        if (j < kept) held\[j\] = x\[u\];$/        if (j < kept - 1) held[j] = x[u];/
