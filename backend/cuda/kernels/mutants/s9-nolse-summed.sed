# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload TestAttentionQuantizingBitExact
# The entries without the float32 row sums (..._nolse: D 64's, the
# softcap twins') telling the rows without keys from those sums, which
# they never take: every row is written as zeros. Only the calls without
# an LSE run those entries, so the tensor forms' runs without one
# (TestNewResidentMatchesUpload) and the fused calls'
# (TestAttentionQuantizingBitExact) catch it.
s/^  const bool summed = !NOLSE && (sums || !SUMLESS);$/  const bool summed = sums || !SUMLESS;/
