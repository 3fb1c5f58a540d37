# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# A gather block's next tile is loaded from the page of the tile before
# it: TestPagedPrefillMatchesDense must fail on it.
s/nx.blk = run.blk\[i + 1\];/nx.blk = run.blk[i];/
