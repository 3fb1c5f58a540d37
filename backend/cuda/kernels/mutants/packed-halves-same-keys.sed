# module: attention_sm90a.cu
# tests: TestPackedVarlen
# Both warpgroups of an item's halves take the first half of every tile's
# keys: those keys count twice and the others not at all, and the decode
# tokens must fail on it.
s/      ch\.kh = cw;/      ch.kh = 0;/
