# module: attention_sm90a.cu
# tests: TestAttentionQuantizingBitExact
# quant_pack9's long form taking a chunk's magnitude bits as its amax
# even where a value is non-finite (chunk_amax without its other path):
# a head holding ±Inf or NaN gets an infinite or NaN scale.
s/^  if (t < 0x7F800000u) return __uint_as_float(t);$/  return __uint_as_float(t);/
