# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel copies a value page's codes into the V image
# without re-encoding them at the sequence's scale: TestPagedPrefillMatchesDense
# must fail on it.
s/^          if (rv != 1.f) x = rescale16(x, rv);$/          /
