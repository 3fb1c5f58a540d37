# module: attention_sm90a.cu
# tests: TestPackedVarlen
# The packed form takes a block row's query without the item's first row:
# every item after a sequence's first for its KV head reads and writes the
# first one's rows, and the chunks past 128 packed rows must fail on it.
s/__device__ __forceinline__ int query(int r) const { return (r0 + r) \/ group; }/__device__ __forceinline__ int query(int r) const { return r \/ group; }/
