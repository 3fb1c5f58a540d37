# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The narrow tiled tensor form's blocks placed 128 rows apart, as the wide
# form's: its one consumer warpgroup attends the first 64 of them, and the
# other rows of each pair of blocks are never written.
s|  constexpr int ROWS = ONE ? G::ONE_BM : NARROW ? HopperTiles<D>::NARROW_BM : BM;|  constexpr int ROWS = ONE ? G::ONE_BM : BM;|
