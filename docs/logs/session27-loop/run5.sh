#!/usr/bin/env bash
# Session 27, run 5: v16 (the kernels in the tree, built by gen.sh in run 4) against v15 (bin/old.cubin,
# the committed cubin of 288002b) on the tiled shapes, two rounds alternating (scripts/hopper-ab.sh);
# then issue #10's shapes beside the peers in one run (scripts/hopper-bench.sh: cuDNN, flash, Triton FP8).
set -u
export OUT; name=run5; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r5; mkdir -p $w
use_built_kernels
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:causal 4x32x4096x4096x192 4x32x4096x4096x256 2x16x16384x16384x128" \
  ROUNDS=2 OUT=$w timeout 280 bash scripts/hopper-ab.sh v16=$FP8ATTN_CUBIN v15=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -10 $w/ab.txt
OUT=$w timeout 280 bash scripts/hopper-bench.sh > $w/hopper-bench.txt 2>&1
grep -v "^$" $w/hopper-bench.txt | tail -30
tar czf $OUT/run5.tgz -C $w .
