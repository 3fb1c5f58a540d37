#!/usr/bin/env bash
# Session 26, run 5: binaries of this tree (v15 embedded). (1) v15 against the committed
# v13 cubin (bin/old.cubin) on the D 64 shapes, two rounds (scripts/hopper-ab.sh);
# (2) issue #10's shapes beside the peers in one run (scripts/hopper-bench.sh).
set -u
export OUT; name=run5; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r5; mkdir -p $w
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=2 OUT=$w timeout 200 bash scripts/hopper-ab.sh \
  v15=$PWD/backend/cuda/kernels/attention_sm_90a.cubin v13=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -4 $w/ab.txt
OUT=$w timeout 380 bash scripts/hopper-bench.sh > $w/hopper-bench.txt 2>&1
cat $w/hopper-bench.txt | grep -v "check: max_err"
tar czf $OUT/run5.tgz -C $w .
