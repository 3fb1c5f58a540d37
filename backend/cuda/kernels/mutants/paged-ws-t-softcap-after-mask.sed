# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# PagedWarpT (the warp-specialized kernel's units of at most
# PagedWSTiles<D>::T_ROWS rows: a decode step of a group of four) masks
# the raw score and caps it after, so that a masked key's -Inf comes back
# as the cap's floor -softcap and weighs e^(-softcap - m): the paged
# table's small cap under a window (softcap-window-decode) must fail.
s/^        sc\[i\]\[h\] = (unsigned)key < (unsigned)keys.span ? x : NEG_INF;$/        sc[i][h] = (unsigned)key < (unsigned)keys.span ? (s[i][2 * h] + s[i][2 * h + 1]) * f : NEG_INF; if constexpr (CAP) sc[i][h] = softcap_score(sc[i][h], cap, inv_cap);/
