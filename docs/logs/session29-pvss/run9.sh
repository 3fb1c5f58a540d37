#!/usr/bin/env bash
# Session 29, run 9: the review's kernels (run 8, now in the tree; d64's SASS moved) against v19
# (bin/old.cubin) on the D 64 shapes, two rounds.
set -u
export OUT; name=run9; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/s29r9; mkdir -p $w
use_built_kernels
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=2 OUT=$w timeout 150 bash scripts/hopper-ab.sh review=$FP8ATTN_CUBIN v19=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -4 $w/ab.txt
tar czf $OUT/run9.tgz -C $w .
