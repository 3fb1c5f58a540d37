# module: attention_sm90a.cu
# tests: TestKeySplit
# The merge adding the sink's weight once a part, not once a row.
s|    den += ex2(w\[s \* rows\] - mw);|    den += ex2(w[s * rows] - mw) + ex2(sink - mw);|
