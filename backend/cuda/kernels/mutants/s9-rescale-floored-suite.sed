# module: attention_sm90a.cu
# tests: TestConformance
# The Hopper kernel's rescale factor floored at 2^-4 (s9-rescale-floored),
# against the conformance suite: FP8MMATolerance, a worst case, takes it;
# the RMS tier (FP8MMARMSTolerance) does not, on the rising keys.
s/^  s.alpha = exp2f(m - s.m_use);$/  s.alpha = fmaxf(exp2f(m - s.m_use), 0.0625f);/
