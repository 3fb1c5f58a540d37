# module: testkernels_sm90a.cu
# tests: TestFastEncodeAllFloats
# quant_pack9's fast encode (hopper/quant_pack.cuh's Encoder) without its
# remainder step: the quotient x·(1/s), off by an ulp at times. The test
# runs the Encoder through the sm_90a test module's fp8attn_encode_check.
s/^    return __fmaf_rn(-__fmaf_rn(q0, s, -x), r, q0);$/    return q0;/
