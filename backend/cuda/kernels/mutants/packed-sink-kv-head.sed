# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The packed form takes a row's sink by its KV head: the case with sinks
# must fail on it.
s/^    const float sink = p.sinks ? p.sinks\[h\] \* LOG2E : NEG_INF;$/    const float sink = p.sinks ? p.sinks[pr.kvh] * LOG2E : NEG_INF;/
