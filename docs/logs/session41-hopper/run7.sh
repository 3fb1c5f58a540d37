#!/usr/bin/env bash
# Session 41, run 7: mufu_probe.cu as committed (mode 0 kept alive, mode 3's shuffles as max reductions, mode 5 added), EX2 results per SM clock from the softmax's
# instruction stream at 1-4 warps a scheduler, and the SASS of each mode.
set -u
d=docs/logs/session41-hopper
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/mufu_probe $d/mufu_probe.cu > "$OUT/build.txt" 2>&1
/tmp/mufu_probe | tee "$OUT/probe.txt"
cuobjdump -sass /tmp/mufu_probe > /tmp/probe.sass
gzip -c /tmp/probe.sass > "$OUT/probe.sass.gz"
