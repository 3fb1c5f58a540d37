# module: attention_sm90a.cu
# tests: TestPagedPrefillKeySplit
# A key split's blocks reading their batch entry's key count at grid z
# (b·splits + part) instead of b: parts bound by another sequence's
# length, or by a word past the lengths.
s|  const long long skb = p.seq_k ? (long long)p.seq_k\[b\] : p.sk;|  const long long skb = p.seq_k ? (long long)p.seq_k[blockIdx.z % p.b] : p.sk;|
