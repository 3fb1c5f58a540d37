# module: attention_sm90a.cu
# tests: TestPackedVarlen
# A decode item's float32 sums (the LSE's) keep the first warp's keys
# alone: its rows' LSEs must fail.
s/    l\[0\] = (v\[0\].x + v\[1\].x) + (v\[2\].x + v\[3\].x);/    l[0] = v[0].x;/
