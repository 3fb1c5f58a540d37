# module: attention.cu
# tests: TestConformance
# The Ada kernel's rescale factor floored at 2^-4 (s10-rescale-floored),
# against the conformance suite's RMS tier: the rising keys and the
# windows over large scores catch it.
s/^        const float alpha = ex2((m\[h\] - m_new\[h\]) \* c\[h\]);$/        const float alpha = fmaxf(ex2((m[h] - m_new[h]) * c[h]), 0.0625f);/
