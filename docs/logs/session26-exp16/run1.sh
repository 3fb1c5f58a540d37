#!/usr/bin/env bash
# Session 26, run 1: ex2.approx.f16x2 on the H200 (ex2_probe.cu): accuracy over
# every f16 input, throughput against ex2.approx.ftz.f32, and the SASS it becomes.
set -u
d=docs/logs/session26-exp16
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/ex2_probe $d/ex2_probe.cu 2>&1 | tee "$OUT/build.txt"
/tmp/ex2_probe | tee "$OUT/probe.txt"
cuobjdump -sass /tmp/ex2_probe > /tmp/probe.sass
for f in rate_f32 rate_f16x2 pair_f32 pair_f16x2; do
  awk -v f="$f" '/Function :/ {on = index($0, f) > 0 && index($0, f "x2") == 0} on' /tmp/probe.sass > "$OUT/$f.sass"
  echo "$f: $(grep -c MUFU "$OUT/$f.sass") MUFU, $(grep -o 'MUFU\.[A-Z0-9.]*' "$OUT/$f.sass" | sort | uniq -c | tr '\n' ' ') $(grep -o 'F2FP\.[A-Z0-9.]*' "$OUT/$f.sass" | sort | uniq -c | tr '\n' ' ')"
done | tee "$OUT/sass-summary.txt"
