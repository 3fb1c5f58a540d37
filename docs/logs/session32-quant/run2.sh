#!/usr/bin/env bash
# Session 32, run 2: (a) loads.cu again, with the load patterns (the
# quantizing form's Q and K rows as committed, whole sectors, coalesced)
# and the spread cluster policy; (b) the whole-sector Q and K loads
# (FP8ATTN_QC_SECTORS) A/B against the committed cubin, its broken build,
# and the stamps timeline of both.
set -u
export OUT
d=docs/logs/session32-quant
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/loads $d/loads.cu && /tmp/loads | tee "$OUT/loads.txt"
VARIANTS="sectors:-DFP8ATTN_QC_SECTORS=1 broken-sectors:-DFP8ATTN_QC_SECTORS=1,-DFP8ATTN_QC_BROKEN_SECTORS=1 base-stamps:-DFP8ATTN_QP_STAMPS=1 sectors-stamps:-DFP8ATTN_QC_SECTORS=1,-DFP8ATTN_QP_STAMPS=1" \
  ROUNDS=3 timeout 420 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
