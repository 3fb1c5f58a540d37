# module: attention_sm90a.cu
# tests: TestPackedVarlen
# A decode item's mask drops the window's lower edge: its rows see every
# key before their own, and the cases with a window must fail.
s/      if (key >= hi\[e\] || key < lo\[e\]) s\[i\] = NEG_INF;/      if (key >= hi[e]) s[i] = NEG_INF;/
