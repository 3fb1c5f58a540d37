# module: attention_sm90a.cu
# tests: TestPagedPrefillMatchesDense
# Stage 9's consumers bound every batch entry's rows by the tensors' key
# extent, not by the entry's own key count (Params.seq_k): a shorter
# sequence's rows see the zeros past its last key.
s/const long long skc = p.seq_k ? (long long)p.seq_k\[b\] : p.sk;/const long long skc = p.sk;/
