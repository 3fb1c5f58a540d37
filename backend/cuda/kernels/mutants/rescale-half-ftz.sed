# module: testkernels_sm90a.cu
# tests: TestRescaleAllCodes
# The half-precision products flushed to zero below half's smallest normal
# (2^-14): at a ratio of 2^-15 or less the multiplier itself flushes, and
# every code whose product is at least E4M3's smallest subnormal becomes a
# zero. Ratios that small come from pages 15 binades below their
# sequence's largest, which TestRescaleAllCodes covers and the attention
# tests may not.
s/"mul\.rn\.f16x2 a, a, %2;\\n\\tmul\.rn\.f16x2 b, b, %2;/"mul.rn.ftz.f16x2 a, a, %2;\\n\\tmul.rn.ftz.f16x2 b, b, %2;/
