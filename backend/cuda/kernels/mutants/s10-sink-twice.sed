# module: attention.cu
# tests: TestConformance
# The Ada kernel counting the sink's weight twice in a row's normalizer:
# the cases with sinks fail.
s/^    if (p.sinks) den += ex2(fmaf(p.sinks\[qh\[h\]\], LOG2E, off\[h\]));$/    if (p.sinks) den += 2.f * ex2(fmaf(p.sinks[qh[h]], LOG2E, off[h]));/
