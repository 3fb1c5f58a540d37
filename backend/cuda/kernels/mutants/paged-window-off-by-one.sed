# module: paged.cu
# tests: TestPagedVariants TestPagedConformance
# A sliding window of W keys that lets each row see W + 1 (its lower edge
# one key too early): the windowed cases must fail.
s/^  return p.window > 0 ? max(0, n - sq + i - p.window + 1) : 0;$/  return p.window > 0 ? max(0, n - sq + i - p.window) : 0;/
