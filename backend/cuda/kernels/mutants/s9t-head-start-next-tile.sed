# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The tiled tensor form's head start transposing the two tiles after its
# first (key tiles t0 + 1 and t0 + 2) into ring slots 0 and 1: the blocks
# of a one-wave grid attend their first tiles with the wrong V.
s|      tensor_rows<D, BN>(\&tp.v, base + S::STAGE, t0 \* BN, 2 \* BN, kvh, b, base + S::STAGED);|      tensor_rows<D, BN>(\&tp.v, base + S::STAGE, (t0 + 1) * BN, 2 * BN, kvh, b, base + S::STAGED);|
