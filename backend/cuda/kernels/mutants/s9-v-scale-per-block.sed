# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# The quantizing form's V codes with each block's V scale from its own
# keys' amax (the producer's exchange skipped, the epilogue's descale still
# the head's).
s/^  for (int c = 0; c < NC; c++) am = fmaxf(am, qs.parts_v\[c\].x);$/  for (int c = 0; c < NC; c++) am = qs.parts_v[r].x;/
