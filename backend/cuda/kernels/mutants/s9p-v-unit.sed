# module: attention_sm90a.cu
# tests: TestPagedTilesMixedScales
# The paged form's fold keeps O in the first tile's V units when a later
# tile's V scale differs: the mixed scales must fail on it.
s/const float r = vt > 0.f \&\& vunit > 0.f ? vunit \/ vt : 1.f;/const float r = 1.f;/
