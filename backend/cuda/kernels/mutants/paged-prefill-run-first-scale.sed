# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# Every tile of a gather block re-encodes its codes by the ratio of the
# run's first page's scales, not its own page's: TestPagedPrefillMatchesDense
# (pages 2^20 apart in magnitude) must fail on it.
s/if (rows > 0) rk = run.ks\[i\] \/ sk, rv = run.vs\[i\] \/ sv;/if (rows > 0) rk = run.ks[0] \/ sk, rv = run.vs[0] \/ sv;/
