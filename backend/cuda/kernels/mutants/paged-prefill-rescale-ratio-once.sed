# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The ratio goes into the low half of the multiplier only: the re-encode
# zeroes every second code of a page whose scale is below its sequence's
# (the half-precision path of sm_89 and newer):
# TestPagedPrefillMatchesDense must fail on it.
s/const uint32_t r2 = 0x10001u \* __half_as_ushort/const uint32_t r2 = 0x1u * __half_as_ushort/
