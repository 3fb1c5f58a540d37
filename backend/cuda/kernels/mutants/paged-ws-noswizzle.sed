# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The warp-specialized kernel reads the keys without their chunk swizzle:
# TestPagedConformance and TestPagedAgainstCPU must fail on it.
s/const int krow = kl \* D, ksw = k_swizzle(kl, D \/ 16);/const int krow = kl * D, ksw = 0;/
