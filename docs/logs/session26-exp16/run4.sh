#!/usr/bin/env bash
# Session 26, run 4: v15 (ping-pong at D 64) built by gen.sh (OUT/kernels.tgz), then
# validated with those kernels: the whole backend suite (TestPTXFresh skipped: the test
# binary embeds the earlier source hash), the sdpa device tests, and memcheck, synccheck
# and racecheck on stage 9's D 64 tiled cases.
set -u
export OUT; name=run4; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r4; mkdir -p $w
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
grep -A3 "stage9_d64'\|stage9f_d64'" backend/cuda/kernels/resources.txt | grep -E "Compiling|spill|Used"
use_built_kernels
timeout 300 bin/cuda.test -test.skip 'PTXFresh' -test.timeout 290s > $w/cuda-tests.txt 2>&1; echo "backend suite rc $?: $(tail -1 $w/cuda-tests.txt)"
grep -E -- '--- FAIL' $w/cuda-tests.txt | head
timeout 120 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests.txt 2>&1; echo "sdpa tests rc $?: $(tail -1 $w/sdpa-tests.txt)"
for tool in memcheck synccheck racecheck; do
  run='Conformance/cuda/stage9/(long-keys|gqa/|small)'
  [ $tool = racecheck ] || run="$run|FP8PAccuracy"
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run "$run" -test.timeout 190s > $w/$tool.txt 2>&1
  echo "$tool rc $?: $(grep SUMMARY $w/$tool.txt)"
done
tar czf $OUT/run4.tgz -C $w .
