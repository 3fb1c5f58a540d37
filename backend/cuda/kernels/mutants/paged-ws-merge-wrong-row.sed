# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# merge_warps weighs each lane's values by the stats of the row the
# transposed state's lanes hold (lane & 3), whatever the state: units of
# PagedWarp (eight rows, lane >> 2) get other rows' weights. The chunk and
# GQA cases of TestPagedConformance and TestPagedAgainstCPU must fail.
s/const int r = State::row(lane);/const int r = lane \& 3;/
