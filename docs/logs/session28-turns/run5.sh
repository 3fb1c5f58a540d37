#!/usr/bin/env bash
# Session 28, run 5: v18 (the kernels gen.sh built in run 4, now in the tree) against v17 (bin/old.cubin,
# the committed cubin of cd264a3) on the D 64 shapes, two rounds (scripts/hopper-ab.sh); then issue #10's
# shapes beside the peers in one run (scripts/hopper-bench.sh: cuDNN, flash, Triton FP8).
set -u
export OUT; name=run5; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r5; mkdir -p $w
use_built_kernels
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=2 OUT=$w timeout 150 bash scripts/hopper-ab.sh v18=$FP8ATTN_CUBIN v17=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -4 $w/ab.txt
OUT=$w timeout 330 bash scripts/hopper-bench.sh > $w/hopper-bench.txt 2>&1
grep -v "^$" $w/hopper-bench.txt | tail -30
tar czf $OUT/run5.tgz -C $w .
