# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# A gather block stops a tile short of its run, so every run's last tile
# is left as the call before left it (NaN codes in the test):
# TestPagedPrefillMatchesDense must fail on it.
s/t1 = min(t0 + PREFILL_TILES, p.tiles);/t1 = min(t0 + PREFILL_TILES - 1, p.tiles);/
