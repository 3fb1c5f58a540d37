# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# PagedWarp (every unit of the cp.async kernel, and the warp-specialized
# kernel's units of more rows than PagedWSTiles<D>::T_ROWS; PagedWarpT's
# twin is paged-ws-t-softcap-after-mask) masks the raw score and caps it
# after, so that a masked key's -Inf comes back as the cap's floor
# -softcap and weighs e^(-softcap - m): the paged table's small caps under
# a window (softcap-window-chunk, all-split) must fail.
s/^        sc\[j\]\[e\] = (unsigned)key < (unsigned)keys.span ? x : NEG_INF;$/        sc[j][e] = (unsigned)key < (unsigned)keys.span ? (s[j][e] + s[j][e + 2]) * f : NEG_INF; if constexpr (CAP) sc[j][e] = softcap_score(sc[j][e], cap, inv_cap);/
