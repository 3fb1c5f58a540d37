# module: attention_sm90a.cu
# tests: TestConformance
# The float32 row sums skipped even where the call asks for an LSE (at
# D 96 and above without a softcap, where the copy without them is
# built): the LSE is -Inf; the output stays right (the rows without keys
# are told by the normalizer then).
s/^  const bool sums = SPLIT || p.lse != nullptr;$/  const bool sums = SPLIT;/
