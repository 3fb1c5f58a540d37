#!/usr/bin/env bash
# Session 29, run 2: the loop timeline (FP8ATTN_S9_LOOP_STAMPS=1, TestStage9LoopTimeline)
# of this tree's default build (st: P·V from registers) and of the SS build (stss:
# FP8ATTN_S9_PV_SS=1) at D 64 and 128: does the issue of Q·K(t)ᵀ and P(t-1)·V(t-1)
# still take the tensor cores' time when P·V reads P from shared memory?
set -u
export OUT; name=run2; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s29r2; mkdir -p $w
for v in st:-DFP8ATTN_S9_LOOP_STAMPS=1 stss:-DFP8ATTN_S9_LOOP_STAMPS=1,-DFP8ATTN_S9_PV_SS=1 stssp:-DFP8ATTN_S9_LOOP_STAMPS=1,-DFP8ATTN_S9_PV_SS=1,-DFP8ATTN_S9_PARTS_D128=1; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
for n in st stss stssp; do
  for sh in 4x32x4096x4096x64 4x32x4096x4096x128; do
    FP8ATTN_S9_LOOP_STAMPS=1 FP8ATTN_LOOP_SHAPE=$sh FP8ATTN_CUBIN=$w/$n.cubin timeout 120 bin/cuda.test -test.run 'TestStage9LoopTimeline' -test.v > $w/timeline-$n-$sh.txt 2>&1
    echo "== $n $sh"; grep -vE "^(=== RUN|--- PASS|PASS|ok)" $w/timeline-$n-$sh.txt | sed 's/^ *//' | head -30
  done
done
tar czf $OUT/run2.tgz -C $w --exclude='*.cubin' .
