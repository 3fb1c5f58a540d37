#!/usr/bin/env bash
# Session 41, run 6: bulkloads.cu (with path_amax: ld.global.nc, the .L2::256B hint, cp.async.cg), the mission's 3 MB of float32 read by 64
# blocks of 48 KB through per-thread loads, bulk copies (1-32 a block) or
# both at once, in graph replay with PDL, without clusters and in clusters of 4.
set -u
d=docs/logs/session41-hopper
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/bulkloads $d/bulkloads.cu > "$OUT/build6.txt" 2>&1 || { cat "$OUT/build4.txt"; exit 1; }
/tmp/bulkloads | tee "$OUT/bulkloads6.txt"
