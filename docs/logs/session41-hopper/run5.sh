#!/usr/bin/env bash
# Session 41, run 5: where both open GPU issues stand on main (571d9b0's
# kernels, unchanged since session 33): issue #10's shapes beside cuDNN,
# flash and Triton FP8 in one run (scripts/hopper-bench.sh, graph replay,
# the mission and long shapes checked against the float64 oracle), then
# issue #12's quantize + attention step against the attention alone
# (scripts/quantpack-ab.sh, the committed cubin, the bit-exactness test,
# three rounds of BenchmarkDeviceQuantizeAttention).
set -u
export OUT; name=run5; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r5; mkdir -p $w/hb $w/qp
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
OUT=$w/hb bash scripts/hopper-bench.sh 2>&1 | tee $w/hopper-bench.txt
ROUNDS=3 OUT=$w/qp bash scripts/quantpack-ab.sh 2>&1 | tail -20 | tee $w/quantpack.txt
tar czf $OUT/$name.tgz -C $w .
