# module: attention_sm90a.cu
# tests: TestPackedVarlen
# A decode item writes Pᵀ's weights of its first keys at their row in K's
# order, not at their key's slot in V's: weights meet other keys' values,
# and the decode tokens' rows must fail on it.
s/  const int sl0 = kr0 % 32, sl1 = kr1 % 32;/  const int sl0 = rho % 32, sl1 = kr1 % 32;/
