# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel leaves a shorter sequence's slots past its last
# key as they were (NaN codes in the test) instead of zeros: the prefill
# kernel's last tile of that sequence multiplies them by zero weights.
s/padded = (n + 255) \/ 256 \* 256;/padded = n;/
