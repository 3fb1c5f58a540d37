# module: attention.cu
# tests: TestConformance
# The Ada kernel taking K's one-instruction copy path wherever K's row
# stride is the kernel's head dim, also for a smaller head dim whose rows
# lie side by side at that stride (BSHD, D 32 with two KV heads): a tile
# is then read as dense rows of the kernel's width.
s/^  const int dense_tiles = (p.kv_row_stride == D \&\& dk == D ? sk \/ BN : 0) - tb, kend = sk - k0;$/  const int dense_tiles = (p.kv_row_stride == D ? sk \/ BN : 0) - tb, kend = sk - k0;/
