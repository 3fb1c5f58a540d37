#!/usr/bin/env bash
# Session 27, run 4: gen.sh again (FP8ATTN_S9_BROKEN_PARTS added: the cubin must equal run 3's byte
# for byte; OUT/kernels.tgz), then on the v16 kernels: memcheck, synccheck and racecheck on stage 9's
# D 128, 192 and 256 conformance cases and memcheck on its TestFP8PAccuracy; the broken build
# -DFP8ATTN_S9_BROKEN_PARTS=1, which the stage-9 tests must fail; then v16 against the D 192 build in
# three parts (bin/p3.cubin, validated in run 3) at D 192, two rounds.
set -u
export OUT; name=run4; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r4; mkdir -p $w
cp $k/attention_sm_90a.cubin $w/run3.cubin
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -DFP8ATTN_S9_BROKEN_PARTS=1 -o $w/broken.cubin attention_sm90a.cu > $w/build-broken.log 2>&1) &
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
wait
cmp $k/attention_sm_90a.cubin $w/run3.cubin && echo "gen.sh: run 3's cubin, byte for byte"
use_built_kernels
for tool in memcheck synccheck racecheck; do
  run='Conformance/cuda/stage9/(gqa-chunk|mqa|d192|d256)'
  [ $tool = racecheck ] && run='Conformance/cuda/stage9/(gqa-chunk|d192|d256)'
  timeout 130 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run "$run" -test.timeout 125s > $w/$tool.txt 2>&1
  echo "$tool rc $?: $(grep SUMMARY $w/$tool.txt)"
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 bin/cuda.test -test.run 'FP8PAccuracy/stage9' -test.timeout 95s > $w/memcheck-acc.txt 2>&1
echo "memcheck FP8PAccuracy rc $?: $(grep SUMMARY $w/memcheck-acc.txt)"
FP8ATTN_CUBIN=$w/broken.cubin timeout 100 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-broken.txt 2>&1
echo "broken build rc $? (must fail): $(grep -c -- '--- FAIL' $w/tests-broken.txt) FAIL lines"; grep -E -- '--- FAIL' $w/tests-broken.txt | head -8
SHAPES="4x32x4096x4096x192" ROUNDS=2 OUT=$w/p3 timeout 80 bash scripts/hopper-ab.sh v16=$FP8ATTN_CUBIN p3=$PWD/bin/p3.cubin > $w/ab-p3.txt 2>&1
tail -2 $w/ab-p3.txt
rm -f $w/*.cubin
tar czf $OUT/run4.tgz -C $w .
