# module: attention_sm90a.cu
# tests: TestPackedVarlen
# A decode item folds each tile's P·V without moving O to the tile's V
# scale: over pages of scales 10^6 apart its rows must fail.
s/    ao = make_float2(s0.alpha \* r, s1.alpha \* r);/    ao = make_float2(s0.alpha, s1.alpha);/
