# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# The rows mask only the keys past their last (the window's lower edge is
# left to the split plan, which starts at a tile boundary and at the
# unit's first row): the window cases whose edges fall inside a tile, or
# whose rows start their windows at different keys, must fail on it.
s/  return {lo, max(0, vis - lo)};/  return {0, vis};/
