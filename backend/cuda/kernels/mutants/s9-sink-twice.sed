# module: attention_sm90a.cu
# tests: TestConformance
# The sink's weight counted twice in a row's denominator: the cases with
# sinks fail.
s/^    const float f = vs \/ (lsum\[half\] + ex2(sink - m\[half\] + 8.f));$/    const float f = vs \/ (lsum[half] + 2.f * ex2(sink - m[half] + 8.f));/
