# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The warp-specialized kernel's producers stream a unit's first tiles from
# the pages they loaded ahead for the next unit (or none, for a block's last):
# TestPagedConformance and TestPagedAgainstCPU must fail on it.
s/int pg = pg_cur;/int pg = pg_next;/
