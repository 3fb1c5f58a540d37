# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# Each query chunk encodes with its own amax's scale, not its head's:
# TestPagedPrefillMatchesDense must fail on it.
s/scale = scale_for_amax(__uint_as_float(\*(volatile unsigned\*)&hw\[0\]));/scale = scale_for_amax(m);/
