# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The packed form's window lets each row see W + 1 keys (its lower edge
# one key too early): the case with a window must fail on it.
s/  const long long pos = p.mask == 2 ? i + sk - sq : i, lower = pos - p.window + 1;/  const long long pos = p.mask == 2 ? i + sk - sq : i, lower = pos - p.window;/
