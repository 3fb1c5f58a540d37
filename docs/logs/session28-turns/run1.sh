#!/usr/bin/env bash
# Session 28, run 1: the consumer warpgroups take turns to run their softmaxes
# (-DFP8ATTN_S9_SOFTMAX_TURNS=1), so that each runs its exponentials alone on
# the MUFU while the other issues and waits for its GEMMs:
#   src:  no macro (must equal the committed cubin, bin/old.cubin);
#   smt:  softmax turns, ping-pong as committed (issue turns at D 64, 192, 256);
#   smt0: softmax turns, no issue turns (-DFP8ATTN_S9_PINGPONG=0);
#   smt1: softmax turns and issue turns at every head dim (-DFP8ATTN_S9_PINGPONG=1);
#   st:   the loop-stamps build of smt (TestStage9LoopTimeline at D 64 and 128).
# Each is validated (stage 9's conformance cases and TestFP8PAccuracy) before it is timed.
set -u
export OUT; name=run1; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r1; mkdir -p $w
for v in src: smt:-DFP8ATTN_S9_SOFTMAX_TURNS=1 smt0:-DFP8ATTN_S9_SOFTMAX_TURNS=1,-DFP8ATTN_S9_PINGPONG=0 \
    smt1:-DFP8ATTN_S9_SOFTMAX_TURNS=1,-DFP8ATTN_S9_PINGPONG=1 st:-DFP8ATTN_S9_LOOP_STAMPS=1,-DFP8ATTN_S9_SOFTMAX_TURNS=1; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
cmp $w/src.cubin bin/old.cubin && echo "src: identical to the committed cubin"
for n in smt smt0 smt1; do
  for d in 64 96 128 192 256; do
    echo "$n d$d: $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ')"
  done
  grep -E "error" $w/build-$n.log | head -5
done
for sh in 4x32x4096x4096x64 4x32x4096x4096x128; do
  FP8ATTN_S9_LOOP_STAMPS=1 FP8ATTN_LOOP_SHAPE=$sh FP8ATTN_CUBIN=$w/st.cubin timeout 60 bin/cuda.test -test.run 'TestStage9LoopTimeline' -test.v > $w/timeline-st-$sh.txt 2>&1
  echo "== st $sh"; grep -E "µs a call|warpgroup|softmaxes|producer" $w/timeline-st-$sh.txt | sed 's/^ *//' | head -30
done
ok=()
for n in smt smt0 smt1; do
  [ -s $w/$n.cubin ] || continue
  FP8ATTN_CUBIN=$w/$n.cubin timeout 100 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1
  rc=$?; echo "tests $n rc $rc: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -5
  [ $rc = 0 ] && ok+=("$n=$w/$n.cubin")
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x128 4x32x4096x4096x128:causal 4x32x4096x4096x256" ROUNDS=1 OUT=$w timeout 300 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin "${ok[@]}" > $w/ab.txt 2>&1
tail -8 $w/ab.txt
tar czf $OUT/run1.tgz -C $w --exclude='*.cubin' .
