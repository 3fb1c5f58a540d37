# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# The softcap is applied to the scaled score without the log2(e) factor
# taken out (tanh of the log2-domain score over the natural-log cap): the
# softcap cases with scores near or past the cap must fail on it.
s/__device__ __forceinline__ float softcap_score(float x, float cap, float inv) { return cap \* tanhf(x \* inv); }/__device__ __forceinline__ float softcap_score(float x, float cap, float inv) { return cap * tanhf(x * inv * 1.44269504f); }/
