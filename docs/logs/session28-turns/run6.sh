#!/usr/bin/env bash
# Session 28, run 6: review. Ping-pong's and the softmax turns' barriers through one helper
# (hopper::Turns) instead of four lambdas. gen.sh rebuilds the kernels (OUT/kernels.tgz); each
# stage-9 function's SASS is compared with v18's (bin/v18.cubin, the committed cubin of 522bde6).
# If any differs, stage 9's tests, synccheck on its D 64 cases and an A/B on the D 64 shapes run.
set -u
export OUT; name=run6; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r6; mkdir -p $w
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
use_built_kernels
cmp $k/attention_sm_90a.cubin bin/v18.cubin && echo "cubin: v18's, byte for byte"
for f in $(cuobjdump -elf bin/v18.cubin | grep -oE 'fp8attn_stage9[a-z]*_d[0-9]+' | sort -u); do
  a=$(cuobjdump -sass -fun $f bin/v18.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  b=$(cuobjdump -sass -fun $f $k/attention_sm_90a.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  [ "$a" = "$b" ] && echo "$f same" || echo "$f CHANGED"
done > $w/sass-compare.txt
echo "same: $(grep -c same $w/sass-compare.txt)"; grep CHANGED $w/sass-compare.txt
if grep -q CHANGED $w/sass-compare.txt; then
  timeout 150 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy|QuantizingBitExact' > $w/tests.txt 2>&1; echo "tests rc $?: $(tail -1 $w/tests.txt)"
  timeout 100 compute-sanitizer --tool synccheck --error-exitcode 3 bin/cuda.test -test.run 'Conformance/cuda/stage9/(long-keys|odd|gqa|mqa|sq>sk)/' -test.timeout 95s > $w/synccheck.txt 2>&1
  echo "synccheck rc $?: $(grep SUMMARY $w/synccheck.txt)"
  SHAPES="1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=2 OUT=$w timeout 150 bash scripts/hopper-ab.sh review=$FP8ATTN_CUBIN v18=$PWD/bin/v18.cubin > $w/ab.txt 2>&1
  tail -3 $w/ab.txt
fi
tar czf $OUT/run6.tgz -C $w .
