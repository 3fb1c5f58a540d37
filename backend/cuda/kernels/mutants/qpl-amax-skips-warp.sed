# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# quant_pack9's long form leaving the second loader warp's values out of
# a chunk's amax (a head whose largest value lies there gets too small a
# scale).
s/^          for (int w = 1; w < NL \/ 32; w++) m = fmaxf(m, warp_max\[w\]);$/          for (int w = 2; w < NL \/ 32; w++) m = fmaxf(m, warp_max[w]);/
