# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The merge of an item's halves keeps warpgroup 0's maximum for the LSE
# while it weighs both halves by the larger: the LSEs of rows whose largest
# score lies in the second half must fail on it.
s/    m\[j\] = mx;/    m[j] = m[j];/
