# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# quant_pack9's long form writing each part's image 16 rows short.
s/^        const int we = min(w + PART, w1), base/        const int we = min(w + PART - 16, w1), base/
