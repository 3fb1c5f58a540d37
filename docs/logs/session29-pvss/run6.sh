#!/usr/bin/env bash
# Session 29, run 6: v19 (the kernels gen.sh built in run 5, now in the tree): memcheck, synccheck and
# racecheck on stage 9's D 64 conformance cases (tiled: long-keys, odd, gqa, mqa, sq>sk; one-tile:
# keys129); then issue #10's shapes beside the peers in one run (scripts/hopper-bench.sh: cuDNN, flash,
# Triton FP8).
set -u
export OUT; name=run6; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/s29r6; mkdir -p $w
use_built_kernels
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
for tool in memcheck synccheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run 'Conformance/cuda/stage9/(long-keys|odd|gqa|mqa|sq>sk|keys129)/' -test.timeout 95s > $w/$tool.txt 2>&1
  echo "$tool rc $?: $(grep SUMMARY $w/$tool.txt)"
done
OUT=$w timeout 330 bash scripts/hopper-bench.sh > $w/hopper-bench.txt 2>&1
grep -v "^$" $w/hopper-bench.txt | tail -30
tar czf $OUT/run6.tgz -C $w .
