# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The transposed warp state (PagedWarpT) passes P to the P·V product in the
# Sᵀ accumulators' layout, without movmatrix's transpose: the decode cases of
# TestPagedConformance and TestPagedAgainstCPU (four rows a unit or fewer)
# must fail on it.
s/pb\[i\]\[h\] = movmatrix_trans(f16_hi_lo(pv \* pscale));/pb[i][h] = f16_hi_lo(pv * pscale);/
