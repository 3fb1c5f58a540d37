#!/usr/bin/env bash
# Session 25, run 1: the committed tree (55da4a4) on the H200 with its embedded kernels.
# (1) the host changes since f0fbcc9 validated; (2) the launch floor; (3) the one-tile
# form at 32..256 blocks; (4) issue #10's shapes beside the peers (hopper-bench.sh).
set -u
export OUT; name=run1; . scripts/gpu-lib.sh; unpack_bins
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt"
timeout 300 bin/cuda.test -test.run 'AttentionQuantizingBitExact|Conformance|ConcurrentCalls|FP8PAccuracy|ConfigError' \
  > "$OUT/tests.txt" 2>&1; echo "tests rc $?" | tee -a "$OUT/tests.txt"; tail -3 "$OUT/tests.txt"
timeout 120 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache' > "$OUT/sdpa-tests.txt" 2>&1; echo "sdpa tests rc $?" | tee -a "$OUT/sdpa-tests.txt"
timeout 120 bin/cuda.test -test.run '^$' -test.bench 'LaunchFloor' -test.benchtime 2000x -test.count 3 > "$OUT/floor.txt" 2>&1
grep us/call "$OUT/floor.txt"
for r in 1 2; do for s in 1x8x256x256x64 2x8x256x256x64 4x8x256x256x64 8x8x256x256x64; do
  bin/sdpabench -kernel stage9 -shapes $s -nocheck -iters 2000 2>&1 | grep -E "device|graph" | sed "s|^|r$r $s: |"
done; done > "$OUT/blocks.txt" 2>&1; cat "$OUT/blocks.txt"
timeout 400 bash scripts/hopper-bench.sh > "$OUT/hopper-bench.txt" 2>&1; cat "$OUT/hopper-bench.txt"
