# module: attention_sm90a.cu
# tests: TestConformance
# The softcap taken after the mask: a masked key's -Inf capped to -cap, so
# that the keys outside a row's window (or past its causal edge) come back
# with weight e^(-cap - m): the cases with a softcap and a mask fail.
s/^      if (key >= ((i \& 2) ? rk.hi1 : rk.hi0) || key < ((i \& 2) ? rk.lo1 : rk.lo0)) s\[i\] = NEG_INF;$/      if (key >= ((i \& 2) ? rk.hi1 : rk.hi0) || key < ((i \& 2) ? rk.lo1 : rk.lo0)) s[i] = SOFTCAP ? -1.f : NEG_INF;/
