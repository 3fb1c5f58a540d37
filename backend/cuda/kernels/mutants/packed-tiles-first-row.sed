# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The packed form bounds a block's tiles by its first row's visible keys,
# not its last's: the causal chunks' later rows lose their last keys and
# must fail on it.
s/const int key_hi = VARLEN ? visible_keys(p, pr.query(pr.nrows - 1), pr.count, skb)/const int key_hi = VARLEN ? visible_keys(p, pr.query(0), pr.count, skb)/
