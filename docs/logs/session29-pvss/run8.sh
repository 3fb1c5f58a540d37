#!/usr/bin/env bash
# Session 29, run 8: the review of v19 (one `retire` helper for a finished tile's wait, release and
# fold; the second P set as a compile-time alias, pa_odd, instead of two loops) built by gen.sh; every
# stage-9 function must have v19's SASS (bin/old.cubin, the cubin of da991ae); then stage 9's
# conformance cases and TestFP8PAccuracy on the built kernels.
set -u
export OUT; name=run8; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s29r8; mkdir -p $w
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
use_built_kernels
for f in $(cuobjdump -elf bin/old.cubin | grep -oE 'fp8attn_[a-z0-9_]+' | sort -u); do
  a=$(cuobjdump -sass -fun $f bin/old.cubin 2>/dev/null | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  b=$(cuobjdump -sass -fun $f $k/attention_sm_90a.cubin 2>/dev/null | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  [ "$a" = "$b" ] && echo "$f same" || echo "$f CHANGED"
done > $w/sass-compare.txt
echo "same: $(grep -c same $w/sass-compare.txt)"; grep CHANGED $w/sass-compare.txt
timeout 200 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' > $w/tests.txt 2>&1; echo "stage 9 tests rc $?: $(tail -1 $w/tests.txt)"
tar czf $OUT/run8.tgz -C $w .
