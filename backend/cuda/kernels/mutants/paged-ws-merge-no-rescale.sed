# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The warp-specialized kernel's merge of an item's splits (merge_row_warp)
# does not rescale what it summed when a later chunk of splits raises the
# largest log-sum-exp: the many-split cases of TestPagedAgainstCPU (79 and
# 63 splits, chunks of 16) must fail on it.
s/const float c = mx == NEG_INF ? 0.f : merge_exp2(mx - m);/const float c = mx == NEG_INF ? 0.f : 1.f;/
