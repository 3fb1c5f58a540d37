# module: attention_sm90a.cu
# tests: TestConformance
# The column parts of P·V after the first read the V columns of the part
# before: the cases of D 128, 192 and 256 fail.
s/^    const uint32_t v_addr = smem_u32(s_v + st \* G::VT) + P \* DP \* (PAGED ? 32 : BN);$/    const uint32_t v_addr = smem_u32(s_v + st * G::VT) + (P - (P > 0)) * DP * (PAGED ? 32 : BN);/
