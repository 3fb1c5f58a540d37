# module: attention.cu
# tests: TestConformance
# The Ada kernel's softcap taken after the mask: a masked key's -Inf capped
# to -cap, so that the keys outside a row's window (or past its causal
# edge, or past sk) come back with weight e^(-cap - m), and rows that see
# no key get an output: the cases with a softcap and a mask fail.
s/^          if (key >= vis\[j >> 1\] || (WINDOW \&\& key < lo\[j >> 1\])) s\[n\]\[j\] = NEG_INF;$/          if (key >= vis[j >> 1] || (WINDOW \&\& key < lo[j >> 1])) s[n][j] = SOFTCAP ? -1.f : NEG_INF;/
