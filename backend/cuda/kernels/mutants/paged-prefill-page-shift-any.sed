# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The gather finds a key's page by a shift whatever the page size, the
# shift of its lowest set bit: right for pages of a power of two, a page of
# 96 keys taken as 32. TestPagedPrefillMatchesDense's pages of 96 must
# fail it.
s/const int pshift = (P \& (P - 1)) == 0 ? __ffs(P) - 1 : -1;/const int pshift = __ffs(P) - 1;/
