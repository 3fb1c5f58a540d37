# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel writes each 16-key group of the V image with
# its first two words swapped (keys 2, 3, 10, 11 before 0, 1, 8, 9), not in
# sigma's order: TestPagedPrefillMatchesDense must fail on it.
s/return make_uint4(__byte_perm(x.x, x.z, 0x5410), __byte_perm(x.x, x.z, 0x7632),/return make_uint4(__byte_perm(x.x, x.z, 0x7632), __byte_perm(x.x, x.z, 0x5410),/
