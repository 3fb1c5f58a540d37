# module: attention_sm90a.cu
# tests: TestPagedTilesMixedScales
# The paged form takes row r0 + 8's score factor from row r0 + 4's
# encoder: rows of different magnitudes must fail on it.
s/__shfl_sync(0xffffffffu, c, 2 \* g + 16)/__shfl_sync(0xffffffffu, c, 2 * g + 8)/
