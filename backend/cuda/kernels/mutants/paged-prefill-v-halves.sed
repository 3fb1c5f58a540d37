# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel reads every value from the first 16-key half of its tile's
# row: TestPagedPrefillMatchesDense must fail on it.
s/tile\[v_off(16 \* c + q, j >> 4) + (j & 15)\]/tile[v_off(16 * c + q, 0) + (j \& 15)]/
