#!/usr/bin/env bash
# Session 25, run 5: Nsight Compute on the mission call's one-tile kernel
# (fp8attn_stage9o_d64, the committed cubin embedded in sdpabench): pipe use,
# warp stalls, per-instruction samples of its SASS.
set -u
export OUT; name=run5; . scripts/gpu-lib.sh; unpack_bins
cuobjdump -sass -fun fp8attn_stage9o_d64 backend/cuda/kernels/attention_sm_90a.cubin > "$OUT/stage9o.sass" 2>&1
timeout 300 ncu --set full --import-source no --clock-control none -k 'regex:fp8attn_stage9o_d64' -s 5 -c 1 -o /tmp/one \
  bin/sdpabench -kernel stage9 -shapes mission -nocheck -iters 20 > "$OUT/ncu-run.txt" 2>&1 || echo "ncu rc $?"
ncu -i /tmp/one.ncu-rep --page details > "$OUT/ncu.txt" 2>&1
ncu -i /tmp/one.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-source.csv" 2>&1
grep -E "Duration|Elapsed Cycles|SM Frequency|Pipe|Issue Slots|Stall|Warp Cycles|No Eligible|Active Warps" "$OUT/ncu.txt" | head -40
gzip -f "$OUT/ncu-source.csv"
