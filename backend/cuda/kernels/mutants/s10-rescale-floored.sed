# module: attention.cu
# tests: TestFP8PAccuracy
# The Ada kernel's rescale factor floored at 2^-4 (s9-rescale-floored's
# defect in stage 10's own online-softmax step), against the accuracy
# test (s10-rescale-floored-suite: the conformance suite).
s/^        const float alpha = ex2((m\[h\] - m_new\[h\]) \* c\[h\]);$/        const float alpha = fmaxf(ex2((m[h] - m_new[h]) * c[h]), 0.0625f);/
