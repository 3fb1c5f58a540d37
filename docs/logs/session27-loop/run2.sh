#!/usr/bin/env bash
# Session 27, run 2: P·V in more column parts where the tile accumulator spills
# (D 128: 164 bytes; D 256: 516), validated then timed against the committed cubin:
#   p2:   -DFP8ATTN_S9_PARTS_D128=2 (D 128's P·V in two halves of 64 columns);
#   p2pp: the same with ping-pong at every head dim (-DFP8ATTN_S9_PINGPONG=1);
#   p4:   -DFP8ATTN_S9_PARTS_D256=4 (D 256's in four quarters);
#   all:  p2, p4 and -DFP8ATTN_S9_WAIT_HINT=2.
# Stamps builds of p2 and p4 run TestStage9LoopTimeline at D 128 and 256.
set -u
export OUT; name=run2; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r2; mkdir -p $w
for v in p2:-DFP8ATTN_S9_PARTS_D128=2 p2pp:-DFP8ATTN_S9_PARTS_D128=2,-DFP8ATTN_S9_PINGPONG=1 p4:-DFP8ATTN_S9_PARTS_D256=4 \
    all:-DFP8ATTN_S9_PARTS_D128=2,-DFP8ATTN_S9_PARTS_D256=4,-DFP8ATTN_S9_WAIT_HINT=2 \
    st:-DFP8ATTN_S9_LOOP_STAMPS=1,-DFP8ATTN_S9_PARTS_D128=2,-DFP8ATTN_S9_PARTS_D256=4; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
for n in p2 p2pp p4 all; do
  for d in 128 256; do
    echo "$n d$d: $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ') C7514: $(grep -c C7514 $w/build-$n.log)"
  done
  grep -E "error" $w/build-$n.log | head -5
done
for sh in 4x32x4096x4096x128 4x32x4096x4096x256; do
  FP8ATTN_S9_LOOP_STAMPS=1 FP8ATTN_LOOP_SHAPE=$sh FP8ATTN_CUBIN=$w/st.cubin timeout 120 bin/cuda.test -test.run 'TestStage9LoopTimeline' -test.v > $w/timeline-st-$sh.txt 2>&1
  echo "== st $sh"; grep -E "µs a call|warpgroup|softmaxes|producer" $w/timeline-st-$sh.txt | sed 's/^ *//'
done
ok=()
for n in p2 p2pp p4 all; do
  [ -s $w/$n.cubin ] || continue
  FP8ATTN_CUBIN=$w/$n.cubin timeout 200 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1
  rc=$?; echo "tests $n rc $rc: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -5
  [ $rc = 0 ] && ok+=("$n=$w/$n.cubin")
done
SHAPES="4x32x4096x4096x128 4x32x4096x4096x256" ROUNDS=2 OUT=$w timeout 280 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin "${ok[@]}" > $w/ab.txt 2>&1
tail -7 $w/ab.txt
rm -f $w/*.cubin.unused
tar czf $OUT/run2.tgz -C $w .
