# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel copies a key page's codes without re-encoding them at the
# sequence's scale: TestPagedPrefillMatchesDense must fail on it.
s/^          if (rk != 1.f) y = rescale16(y, rk);$/          /
