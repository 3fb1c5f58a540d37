# module: paged.cu
# tests: TestPagedPrefillMatchesDense
# The prefill-inputs kernel gives every (sequence, KV head) key scale 1, not the largest of
# its pages': TestPagedPrefillMatchesDense must fail on it.
s/    sk = mk > 0.f ? mk : 1.f, sv/    sk = 1.f, sv/
