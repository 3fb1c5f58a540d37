# module: attention_sm90a.cu
# tests: TestPagedPrefillMatchesDense
# Stage 9 loads every batch entry's key tiles up to the tensors' key
# extent, not its own key count (Params.seq_k): a shorter sequence's
# tiles past its last key's (NaN codes in the test) meet zero weights.
s/const long long skb = p.seq_k ? (long long)p.seq_k\[b\] : p.sk;/const long long skb = p.sk;/
