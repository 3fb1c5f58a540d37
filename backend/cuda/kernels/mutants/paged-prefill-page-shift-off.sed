# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The gather's page shift is one too many (log2 of twice the page size):
# a sequence's second half of keys read from its first half's pages.
# TestPagedPrefillMatchesDense must fail on it.
s/const int pshift = (P \& (P - 1)) == 0 ? __ffs(P) - 1 : -1;/const int pshift = (P \& (P - 1)) == 0 ? __ffs(P) : -1;/
