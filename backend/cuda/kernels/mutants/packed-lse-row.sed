# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The packed form writes a row's LSE at its query's index in its sequence,
# not in the packed batch: the cases with an LSE must fail on it.
s/p.lse ? p.lse + h \* p.sq + row : nullptr, o, m\[half\],/p.lse ? p.lse + h * p.sq + (row - pr.start) : nullptr, o, m[half],/
