#!/usr/bin/env bash
# Session 29, run 5: v19 (one set of P registers at D 64) built by gen.sh (OUT/kernels.tgz);
# every stage-9 function but d64's must have the SASS of the committed cubin (bin/old.cubin); then the
# whole backend suite (TestPTXFresh skipped: the binaries embed the old kernels and are pointed at the
# new ones), the sdpa device tests, TestFP8PAccuracy;
# then v19 against v18 in two rounds (the sanitizers are run 6).
set -u
export OUT; name=run5; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s29r5; mkdir -p $w
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
use_built_kernels
grep -A2 "stage9_d64'" $k/resources.txt | grep -E "spill|Compiling" | paste - - | sed 's/Compiling entry function//'
for f in $(cuobjdump -elf bin/old.cubin | grep -oE 'fp8attn_stage9[a-z]*_d[0-9]+' | sort -u); do
  a=$(cuobjdump -sass -fun $f bin/old.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  b=$(cuobjdump -sass -fun $f $k/attention_sm_90a.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  [ "$a" = "$b" ] && echo "$f same" || echo "$f CHANGED"
done > $w/sass-compare.txt
grep -c same $w/sass-compare.txt; grep CHANGED $w/sass-compare.txt
timeout 280 bin/cuda.test -test.skip 'PTXFresh' -test.timeout 270s > $w/cuda-tests.txt 2>&1; echo "backend suite rc $?: $(tail -1 $w/cuda-tests.txt)"
grep -E -- '--- FAIL' $w/cuda-tests.txt | head
timeout 100 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests.txt 2>&1; echo "sdpa tests rc $?: $(tail -1 $w/sdpa-tests.txt)"
timeout 100 bin/cuda.test -test.run 'FP8PAccuracy/stage9' -test.v > $w/accuracy.txt 2>&1; echo "accuracy rc $?: $(grep ratio $w/accuracy.txt | grep -c 'D:64')  D64 lines"; grep ratio $w/accuracy.txt | grep 'D:64' | sed 's/.*N(0,1)//'
# v19 against v18 (bin/old.cubin) on the D 64 shapes, two rounds.
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=2 OUT=$w timeout 150 bash scripts/hopper-ab.sh v19=$FP8ATTN_CUBIN v18=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -5 $w/ab.txt
tar czf $OUT/run5.tgz -C $w .
