# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The gather's re-encode at a page's scale ratio puts each word's second
# pair of codes first (the half-precision path of sm_89 and newer), so
# every re-encoded page's codes land two keys (or two columns) off:
# TestPagedPrefillMatchesDense must fail on it.
s/"mov.b32 %0, {lo, hi};/"mov.b32 %0, {hi, lo};/
