# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# FastDiv's multiplier without its +1: floor(2^32·(2^s - d)/d) alone
# underestimates n/d (3/3 gives 0), so units, pages and in-page offsets
# are worked out wrong. The paged tests must fail.
s|/ (unsigned)d) + 1;|/ (unsigned)d);|
