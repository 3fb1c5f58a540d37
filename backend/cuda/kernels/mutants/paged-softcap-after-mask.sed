# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# PagedWarp (both attention kernels run it) masks the raw score and caps
# it after, so that a masked key's -Inf comes back as the cap's floor
# -softcap and weighs e^(-softcap - m): the softcap cases under a mask or
# a window must fail.
s/^        sc\[j\]\[e\] = (unsigned)key < (unsigned)keys.span ? x : NEG_INF;$/        sc[j][e] = (unsigned)key < (unsigned)keys.span ? (s[j][e] + s[j][e + 2]) * f : NEG_INF; if constexpr (CAP) sc[j][e] = softcap_score(sc[j][e], cap, inv_cap);/
