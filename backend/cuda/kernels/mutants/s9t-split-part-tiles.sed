# module: attention_sm90a.cu
# tests: TestKeySplit
# The key split's parts one tile short: each part but the last leaves its
# last key tile to no part.
s|  const int t0 = tb + part \* per, ntiles = SPLIT ? max(0, min(per, nb - part \* per)) : nb;|  const int t0 = tb + part * per, ntiles = SPLIT ? max(0, min(per - (part + 1 < splits), nb - part * per)) : nb;|
