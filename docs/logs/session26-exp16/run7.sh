#!/usr/bin/env bash
# Session 26, run 7: the final kernels (ping-pong at D 64, 192, 256; FP8ATTN_S9_PINGPONG=2)
# built by gen.sh (OUT/kernels.tgz) and validated with them: the whole backend suite
# (TestPTXFresh skipped: the binary embeds the earlier source hash), the sdpa device tests,
# memcheck, synccheck and racecheck on stage 9's tiled cases at D 64, 192 and 256; then
# against v13 (bin/old.cubin, the committed kernels before this session) on the tiled shapes,
# two rounds (scripts/hopper-ab.sh).
set -u
export OUT; name=run7; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r7; mkdir -p $w
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
use_built_kernels
timeout 300 bin/cuda.test -test.skip 'PTXFresh' -test.timeout 290s > $w/cuda-tests.txt 2>&1; echo "backend suite rc $?: $(tail -1 $w/cuda-tests.txt)"
grep -E -- '--- FAIL' $w/cuda-tests.txt | head
timeout 120 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests.txt 2>&1; echo "sdpa tests rc $?: $(tail -1 $w/sdpa-tests.txt)"
for tool in memcheck synccheck racecheck; do
  run='Conformance/cuda/stage9/(long-keys|gqa/|d192|d256)'
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run "$run" -test.timeout 140s > $w/$tool.txt 2>&1
  echo "$tool rc $?: $(grep SUMMARY $w/$tool.txt)"
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:causal 4x32x4096x4096x192 4x32x4096x4096x256" \
  ROUNDS=2 OUT=$w timeout 280 bash scripts/hopper-ab.sh v15=$FP8ATTN_CUBIN v13=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -9 $w/ab.txt
tar czf $OUT/run7.tgz -C $w .
