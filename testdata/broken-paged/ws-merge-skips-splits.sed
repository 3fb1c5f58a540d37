# The warp-specialized kernel's merge of an item's splits (merge_row_warp)
# leaves every other split out: the split cases of TestPagedConformance and
# TestPagedAgainstCPU must fail on it.
s/weigh_splits(part, wts, D, d, 0, S, 1)/weigh_splits(part, wts, D, d, 0, S, 2)/
