# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel writes each 16-key group of the V image in the
# page's key order for its first eight keys (two byte pairs swapped), not
# the image's (sigma's): TestPagedPrefillMatchesDense must fail on it.
s/return make_uint4(__byte_perm(x.x, x.z, 0x5410), __byte_perm(x.x, x.z, 0x7632),/return make_uint4(__byte_perm(x.x, x.z, 0x7632), __byte_perm(x.x, x.z, 0x5410),/
