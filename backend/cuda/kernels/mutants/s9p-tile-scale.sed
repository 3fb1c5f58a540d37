# module: attention_sm90a.cu
# tests: TestPagedTilesMatchGather
# The paged form's score factors leave out the tile's K scale: every case
# must fail on it.
s/cr = make_float2(fmaxf(c0.x \* ks, 1.17549435e-38f), fmaxf(c0.y \* ks, 1.17549435e-38f));/cr = make_float2(fmaxf(c0.x, 1.17549435e-38f), fmaxf(c0.y, 1.17549435e-38f));/
