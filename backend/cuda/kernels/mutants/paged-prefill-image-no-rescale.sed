# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel copies a value page's codes into the V image
# without re-encoding them at the sequence's scale: TestPagedPrefillMatchesDense
# must fail on it.
/if (key0 + 16 > rows)/,/y = vi_group(y);/ s/^            if (rv != 1.f) y = rescale16(y, rv);$/            /
