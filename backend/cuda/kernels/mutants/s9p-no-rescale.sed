# module: attention_sm90a.cu
# tests: TestPagedTilesMixedScales
# The paged form's producer leaves the smaller K page of a tile at its own
# scale, read at the larger one: the mixed scales must fail on it.
s/^        const float r = fminf(ks0, ks1) \/ kmax;$/        const float r = 1.f;/
