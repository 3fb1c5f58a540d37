# module: attention_sm90a.cu
# tests: TestKeySplit
# The merge giving a row that no part saw a key of an LSE of 0, not -Inf.
s|    if (p.lse \&\& lane == 0) p.lse\[r\] = NEG_INF;|    if (p.lse \&\& lane == 0) p.lse[r] = 0.f;|
