# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# A gather block lays out its first tile's codes again in place of each
# later tile's (their pages and slots found, their codes never loaded):
# TestPagedPrefillMatchesDense must fail on it.
s/^      prefill_load<NC>(p, nx, image, nkx, nvx);$//
