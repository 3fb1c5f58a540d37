# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The tiled tensor form (the grids of more than one wave) loads K from
# tile t rather than the block's first tile plus t, while V and the
# consumers start at the block's first tile: the windowed case whose
# grid is two waves differs from the image form.
s/^          tensor_rows<D, BN>(&tp.k, base + S::K + s \* G::KT, (t0 + t) \* BN, BN, kvh, b, base + S::K_FULL + 8 \* s);$/          tensor_rows<D, BN>(\&tp.k, base + S::K + s * G::KT, t * BN, BN, kvh, b, base + S::K_FULL + 8 * s);/
