# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# The quantizing one-tile form with each block's Q scale from its own rows'
# amax, not the head's (the cluster's exchange skipped for Q).
s/^    am\[0\] = fmaxf(am\[0\], pc.x), am\[1\] = fmaxf(am\[1\], pc.y);$/    am[0] = qs.parts[r].x, am[1] = fmaxf(am[1], pc.y);/
