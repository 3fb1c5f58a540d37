# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The transposed warp state masks its scores by the wrong keys (rows g and
# g+8 of an m16 tile taken as keys 2(g>>1) and 8 apart): the cases whose
# last tile is partial must fail on it.
s/const int key = k0 + 16 \* i + 4 \* (g >> 1) + 2 \* h + (g & 1);/const int key = k0 + 16 * i + 2 * (g >> 1) + 8 * h + (g \& 1);/
