#!/usr/bin/env bash
# Session 33, run 11 (review mend): gen.sh builds the tree with the
# FP8ATTN_S9_LATE_VSRC option removed and qp_stamp written through
# qp_time/qp_put; its SASS against v24's (96ac280) must be the same for
# every function; the bit-exactness tests; a stamps build's timeline (the
# entry time at the first instruction) to show the stamps still work; one
# round against v24's binary.
set -u
export OUT
name=run11
. scripts/gpu-lib.sh; unpack_bins
cp backend/cuda/kernels/attention_sm_90a.cubin /tmp/v24.cubin
build_kernels || { tail -30 "$OUT/gen.log"; exit 1; }
cuobjdump -sass /tmp/v24.cubin > /tmp/a.sass; cuobjdump -sass backend/cuda/kernels/attention_sm_90a.cubin > /tmp/b.sass
python3 docs/logs/session33-stasync/sass_compare.py /tmp/a.sass /tmp/b.sass | tee "$OUT/sass-compare.txt"
TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats' VARIANTS="stamps:-DFP8ATTN_QP_STAMPS=1,-DFP8ATTN_QP_ENTRY_AT=1" \
  OLD_BINS=v24 ROUNDS=1 timeout 300 bash scripts/quantpack-ab.sh > "$OUT/run11.txt" 2>&1
echo "quantpack-ab rc $?"
grep -E "^tests|^round|FAILED|timeline_test.go:1(26|39)" "$OUT/run11.txt"
