# module: attention_sm90a.cu
# tests: TestPackedVarlen
# A decode item's merge drops the second warpgroup's O (its half of every
# tile's keys) while keeping its sums: the decode tokens' rows must fail.
s/    for (int i = 0; i < 4; i++) o\[h\]\[i\] = fmaf(o\[h\]\[i\], f0\[i & 1\], at(4 \* h + i) \* f1\[i & 1\]);/    for (int i = 0; i < 4; i++) o[h][i] = o[h][i] * f0[i \& 1];/
