# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form leaves the query codes unnegated under a negative scale
# (its score factors are positive): the negative case must fail on it.
s/const uint32_t neg = tp.f.scale < 0.0 ? 0x80808080u : 0u;/const uint32_t neg = 0u;/
