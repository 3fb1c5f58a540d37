#!/usr/bin/env bash
# Session 30, run 4 (diagnostic): run 3's gain without the tensor-core row sums, against two
# warpgroups without them. v19nl: the committed source (two consumer warpgroups) with
# FP8ATTN_S9_LSUM=0, run by bin/sdpabench-old; ovlnl: wg3.patch's kernels with FP8ATTN_S9_OVERLAP=1
# FP8ATTN_S9_LSUM=0 (run 3); v19: the committed cubin. Two rounds at B4 H32 S4096 D64 and at
# B4 H32 S4096 D64 causal.
set -u
export OUT; name=run4; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/s30r4; mkdir -p $w/src
k=backend/cuda/kernels-wg3; rm -rf $k; cp -r backend/cuda/kernels $k
tar xzf bin/wg3src.tgz -C $w/src && cp $w/src/backend/cuda/kernels/* $k/
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -DFP8ATTN_S9_OVERLAP=1 -DFP8ATTN_S9_LSUM=0 -o $w/ovlnl.cubin attention_sm90a.cu > $w/build-ovlnl.log 2>&1) &
(cd backend/cuda/kernels && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -DFP8ATTN_S9_LSUM=0 -o $w/v19nl.cubin attention_sm90a.cu > $w/build-v19nl.log 2>&1) &
wait
for n in ovlnl v19nl; do echo "$n: $(grep -A4 "fp8attn_stage9_d64'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ')"; done
SHAPES="4x32x4096x4096x64 4x32x4096x4096x64:causal" ROUNDS=2 OUT=$w timeout 200 bash scripts/hopper-ab.sh "v19=$PWD/bin/old.cubin@bin/sdpabench-old" \
  "v19nl=$w/v19nl.cubin@bin/sdpabench-old" "ovlnl=$w/ovlnl.cubin" > $w/ab.txt 2>&1
tail -4 $w/ab.txt
rm -rf $k
tar czf $OUT/run4.tgz -C $w --exclude='*.cubin' --exclude=src .
