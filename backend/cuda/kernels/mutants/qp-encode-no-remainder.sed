# module: attention_sm90a.cu
# tests: TestFastEncodeAllFloats
# quant_pack9's fast encode without its remainder step: the quotient
# x·(1/s), off by an ulp at times.
s/^    return __fmaf_rn(-__fmaf_rn(q0, s, -x), r, q0);$/    return q0;/
