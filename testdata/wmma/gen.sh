#!/usr/bin/env bash
# Regenerates the committed fragment dumps on a machine with an NVIDIA GPU
# (sm_90 for both builds; a compute_89 PTX build is JIT-compiled there).
# Usage: testdata/wmma/gen.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
nvcc -O2 -gencode arch=compute_89,code=compute_89 "$here/fragdump.cu" -o /tmp/fd89
nvcc -O2 -gencode arch=compute_90,code=sm_90 "$here/fragdump.cu" -o /tmp/fd90
/tmp/fd89 > "$out/dump_compute_89.txt"
/tmp/fd90 > "$out/dump_sm_90.txt"
# Hopper only: the wgmma accumulator (sm_90a).
nvcc -O2 -gencode arch=compute_90a,code=sm_90a "$here/wgmmadump.cu" -o /tmp/wgd
/tmp/wgd > "$out/dump_wgmma_sm_90a.txt"
# Hopper only: the swizzled operand layouts (exits 1 if a product or the control is wrong).
nvcc -O2 -gencode arch=compute_90a,code=sm_90a "$here/wgmmaswizzle.cu" -o /tmp/wgs
/tmp/wgs > "$out/dump_wgmma_swizzle_sm_90a.txt"
# Hopper only: wgmma's A operand from registers, e4m3 (exits 1 if the model or the control is wrong).
nvcc -O2 -gencode arch=compute_90a,code=sm_90a "$here/wgmmars.cu" -o /tmp/wgr
/tmp/wgr > "$out/dump_wgmma_rs_sm_90a.txt"
# sm_89+: P from the Q·Kᵀ accumulators to P·V's e4m3 A registers (exits 1 if
# the product or the control is wrong); the Ada kernel's register path.
nvcc -O2 -gencode arch=compute_89,code=compute_89 "$here/accfp8.cu" -o /tmp/acc
/tmp/acc > "$out/dump_acc_e4m3_compute_89.txt"
# Hopper only: stage-9 operands read from the paged cache's layout, K's rows
# in key_row order and V's page in place (exits 1 if a product or a control is wrong).
nvcc -O2 -gencode arch=compute_90a,code=sm_90a "$here/wgmmapaged.cu" -o /tmp/wgp
/tmp/wgp > "$out/dump_wgmma_paged_sm_90a.txt"
