# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form's two encoders of a query row each take the amax of
# their own half: where a row's amax is in its first half, its second is
# encoded at another scale than its score factor's, and every case must
# fail on it.
s/^  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));$/  m = fmaxf(m, 0.f);/
