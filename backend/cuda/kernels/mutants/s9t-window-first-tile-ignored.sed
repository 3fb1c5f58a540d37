# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The tensor form's tiled producer loads K from key tile 0 on whatever the
# block's first tile (a sliding window's), while V and the consumers start
# at it: the tiled windowed cases differ from the image form.
s/^      tensor_rows<D, BN>(&tp.k, base + S::K + s \* G::KT, (t0 + t) \* BN, BN, kvh, b, base + S::K_FULL + 8 \* s);$/      tensor_rows<D, BN>(\&tp.k, base + S::K + s * G::KT, t * BN, BN, kvh, b, base + S::K_FULL + 8 * s);/
