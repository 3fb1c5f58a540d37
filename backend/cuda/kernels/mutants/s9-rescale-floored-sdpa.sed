# module: attention_sm90a.cu
# tests: TestVariantsGPU
# bin: sdpa
# The Hopper kernel's rescale factor floored at 2^-4 (s9-rescale-floored),
# against the public calls' variants test: the RMS tier takes it on the
# rising keys (with sinks: 0.0815 against 0.0569 on the H200), the LSE
# tier under the D 64 windows.
s/^  s.alpha = exp2f(m - s.m_use);$/  s.alpha = fmaxf(exp2f(m - s.m_use), 0.0625f);/
