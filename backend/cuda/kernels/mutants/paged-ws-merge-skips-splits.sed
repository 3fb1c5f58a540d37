# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The warp-specialized kernel's merge of an item's splits (merge_row_warp)
# leaves every other split out: the split cases of TestPagedConformance and
# TestPagedAgainstCPU must fail on it.
s/l\[j\] = s < S ? __ldcg(lse + s \* 8) : NEG_INF;/l[j] = s < S \&\& j % 2 == 0 ? __ldcg(lse + s * 8) : NEG_INF;/
