#!/usr/bin/env bash
# Session 26, run 6: ping-pong at D 192 and 256 too (-DFP8ATTN_S9_PINGPONG_MAXD=256) against
# v15 (D 64 only): validated (stage 9's conformance suite, TestFP8PAccuracy), then timed on
# D 192 and 256, two rounds (scripts/hopper-ab.sh).
set -u
export OUT; name=run6; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r6; mkdir -p $w
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -DFP8ATTN_S9_PINGPONG_MAXD=256 \
  -o $w/pp256.cubin attention_sm90a.cu > $w/build-pp256.log 2>&1)
grep -A4 "stage9_d256'\|stage9_d192'" $w/build-pp256.log | grep -E "spill|Used"; echo "C7514: $(grep -c C7514 $w/build-pp256.log)"
FP8ATTN_CUBIN=$w/pp256.cubin timeout 240 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' > $w/tests-pp256.txt 2>&1
rc=$?; echo "tests pp256 rc $rc: $(tail -1 $w/tests-pp256.txt)"
if [ $rc = 0 ]; then
  SHAPES="4x32x4096x4096x192 4x32x4096x4096x256" ROUNDS=2 OUT=$w timeout 250 bash scripts/hopper-ab.sh \
    v15=$PWD/$k/attention_sm_90a.cubin pp256=$w/pp256.cubin > $w/ab.txt 2>&1
  tail -4 $w/ab.txt
fi
rm -f $w/*.cubin
tar czf $OUT/run6.tgz -C $w .
