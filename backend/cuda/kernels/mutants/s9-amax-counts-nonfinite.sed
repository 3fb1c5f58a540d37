# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# The quantizing form's amax with the magnitudes of non-finite values
# counted (quant_pack9's rule ignores them): the case with non-finite
# inputs fails.
s/^  return amax4(m, x);$/  return fmaxf(fmaxf(fmaxf(fmaxf(m, fabsf(x.x)), fabsf(x.y)), fabsf(x.z)), fabsf(x.w));/
