# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form's score factor leaves out the tile's K scale: every case
# must fail on it.
s/if constexpr (PAGED) c = fmaxf(c0 \* tile_scales(t).x, 1.17549435e-38f);/if constexpr (PAGED) c = fmaxf(c0, 1.17549435e-38f);/
