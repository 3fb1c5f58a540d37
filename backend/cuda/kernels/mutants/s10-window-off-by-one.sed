# module: attention.cu
# tests: TestConformance
# The Ada kernel's sliding window of W keys letting each row see W + 1
# (its lower edge one key too early): the windowed cases fail.
s/^    lo\[h\] = valid\[h\] ? first_key(p, pos\[h\]) - k0 : 0;$/    lo[h] = valid[h] ? first_key(p, pos[h]) - 1 - k0 : 0;/
