# module: paged.cu
# tests: TestPagedConformance TestPagedAgainstCPU
# The warp-specialized kernel's blocks publish the unit after the one they
# drew (UnitQueue): one unit of every call with more units than blocks is
# left out and another run twice. The ws-3-blocks cases must fail on it.
s/queue.publish(ku, 2 \* G + tk);/queue.publish(ku, 2 * G + tk + 1);/
