# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The head start (the tiled tensor form for grids of one wave) loads its
# first tiles' K from key tile 0 whatever the block's first tile (a
# sliding window's), while V and the consumers start at it: the tiled
# windowed cases differ from the image form.
s/^        tensor_rows<D, BN>(&tp.k, base + S::K + t \* G::KT, (t0 + t) \* BN, BN, kvh, b, base + S::K_FULL + 8 \* t);$/        tensor_rows<D, BN>(\&tp.k, base + S::K + t * G::KT, t * BN, BN, kvh, b, base + S::K_FULL + 8 * t);/
