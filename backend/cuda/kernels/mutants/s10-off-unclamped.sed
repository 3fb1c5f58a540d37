# module: attention.cu
# tests: TestConformance
# The Ada kernel's weight offset left unclamped: a row that sees only
# masked keys in its block's first tile under a score factor above 1 (a
# softcap, or large scales) takes NaN weights, and keeps them once it sees
# keys.
s/^        off\[h\] = fminf(8.f - m_new\[h\] \* c\[h\], 3.40282347e38f);  \/\/ P·2^8 = exp2(s·c - m·c + 8)$/        off[h] = 8.f - m_new[h] * c[h];  \/\/ P·2^8 = exp2(s·c - m·c + 8)/
