# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form copies a tile's first K page into both halves: every case
# must fail on it.
s/tensor_load_5d_at(kdst + PAGE \* D, \&tp.k, 0, 0, 0, 0, 4 \* blk1, kbar);/tensor_load_5d_at(kdst + PAGE * D, \&tp.k, 0, 0, 0, 0, 4 * blk0, kbar);/
