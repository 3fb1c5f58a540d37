# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The merge of an item's halves keeps warpgroup 0's O alone: the second
# half of every tile's keys weighs in the sums but not in the output, and
# the decode tokens must fail on it.
s/    o\[i\] = fmaf(o\[i\], f0\[j\], at(i) \* f1\[j\]);/    o[i] = o[i] * f0[j];/
