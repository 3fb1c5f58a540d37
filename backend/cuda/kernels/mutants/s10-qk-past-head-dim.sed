# module: attention.cu
# tests: TestConformance
# The Ada kernel taking the problem's head dim for its own: Q's fragments
# and K's copies read whole kernel rows from rows of a smaller head dim
# (the next row's codes in the padding columns, on both sides of the
# scores' product), and the epilogue writes the padding columns.
s/^  const int dk = (int)p.d;$/  const int dk = D;/
