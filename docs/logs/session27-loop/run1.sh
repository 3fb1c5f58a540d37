#!/usr/bin/env bash
# Session 27, run 1: builds of this tree's hopper.cuh with nvcc:
#   src: no macro (must equal the committed cubin byte for byte);
#   h1:  -DFP8ATTN_S9_WAIT_HINT=1 (the producer's slot wait suspends instead of spinning);
#   h2:  -DFP8ATTN_S9_WAIT_HINT=2 (the consumers' tile waits too);
#   st, st1: -DFP8ATTN_S9_LOOP_STAMPS=1, without and with WAIT_HINT=1 (diagnostic).
# h1 and h2 are validated (stage 9's conformance suite, TestFP8PAccuracy) before they are
# timed against the committed cubin (scripts/hopper-ab.sh, two rounds); the stamps builds run
# TestStage9LoopTimeline at D 64, 128 and 256.
set -u
export OUT; name=run1; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r1; mkdir -p $w
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
for v in src:-DFP8ATTN_S9_WAIT_HINT=0 h1:-DFP8ATTN_S9_WAIT_HINT=1 h2:-DFP8ATTN_S9_WAIT_HINT=2 st:-DFP8ATTN_S9_LOOP_STAMPS=1 st1:-DFP8ATTN_S9_LOOP_STAMPS=1,-DFP8ATTN_S9_WAIT_HINT=1; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
cmp $w/src.cubin bin/old.cubin && echo "src: the committed cubin, byte for byte"
for n in h1 h2 st; do
  echo "$n: d64 $(grep -A4 "stage9_d64'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ') C7514: $(grep -c C7514 $w/build-$n.log)"
  grep -E "error" $w/build-$n.log | head -5
done
for n in st st1; do
  for sh in 4x32x4096x4096x64 4x32x4096x4096x128 4x32x4096x4096x256 1x8x2048x2048x64; do
    FP8ATTN_S9_LOOP_STAMPS=1 FP8ATTN_LOOP_SHAPE=$sh FP8ATTN_CUBIN=$w/$n.cubin timeout 120 bin/cuda.test -test.run 'TestStage9LoopTimeline' -test.v > $w/timeline-$n-$sh.txt 2>&1
    echo "== $n $sh"; grep -E "µs a call|warpgroup|softmaxes|producer" $w/timeline-$n-$sh.txt | sed 's/^ *//'
  done
done
ok=()
for n in h1 h2; do
  [ -s $w/$n.cubin ] || continue
  FP8ATTN_CUBIN=$w/$n.cubin timeout 200 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1
  rc=$?; echo "tests $n rc $rc: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -5
  [ $rc = 0 ] && ok+=("$n=$w/$n.cubin")
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x128 4x32x4096x4096x256" ROUNDS=2 OUT=$w timeout 300 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin "${ok[@]}" > $w/ab.txt 2>&1
tail -7 $w/ab.txt
tar czf $OUT/run1.tgz -C $w .
