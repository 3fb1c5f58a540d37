# module: attention_sm90a.cu
# tests: TestPagedTilesFlagFactor TestPackedFlagFactor
# The paged form never flags a score factor past the limit: the call must
# then return no error, and the test fail on it.
s/if (ntiles > 0) flag_rows<D>(\*tp, bh, cw, tid, cs.kmax, smem_u32(smem));/if (false) flag_rows<D>(*tp, bh, cw, tid, cs.kmax, smem_u32(smem));/
