#!/usr/bin/env bash
# Session 29, run 4: one set of P registers (FP8ATTN_S9_ONE_PA=1: P(t-1)·V(t-1) waited for and
# folded after tile t's softmax, then P(t) packed into the same registers), which lets D 128 run
# P·V in one column part; with and without ping-pong. Validated, then one round against the
# committed cubin (bin/old.cubin):
#   src:   no macro (must be the committed cubin's code);
#   opa:   ONE_PA=1, one part at D 128;
#   opapp: the same with ping-pong at every head dim;
#   pp1:   two P buffers, one part at D 128 (spills), ping-pong at every head dim.
# Then the stamps builds of opa and opapp at D 128 (TestStage9LoopTimeline).
set -u
export OUT; name=run4; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s29r4; mkdir -p $w
O=-DFP8ATTN_S9_ONE_PA=1 P1=-DFP8ATTN_S9_PARTS_D128=1 PP=-DFP8ATTN_S9_PINGPONG=1 ST=-DFP8ATTN_S9_LOOP_STAMPS=1
vs="src:-DFP8ATTN_S9_ONE_PA=0 opa:$O,$P1 opapp:$O,$P1,$PP pp1:$P1,$PP stopa:$O,$P1,$ST stopapp:$O,$P1,$PP,$ST"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
for f in 64 96 128; do
  cmp <(cuobjdump -sass -fun fp8attn_stage9_d$f $w/src.cubin) <(cuobjdump -sass -fun fp8attn_stage9_d$f bin/old.cubin) > /dev/null && echo "src d$f: the committed SASS" || echo "src d$f: SASS DIFFERS"
done
for n in opa opapp pp1; do
  echo "$n: $(for d in 64 96 128; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' '); "; done) C7514: $(grep -c C7514 $w/build-$n.log)"
  grep -E "error" $w/build-$n.log | head -5
  [ -f $w/$n.cubin ] && FP8ATTN_CUBIN=$w/$n.cubin timeout 280 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1 &
done
wait
ok=()
for n in opa opapp pp1; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -4
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n=$w/$n.cubin")
done
for n in stopa stopapp; do
  sh=4x32x4096x4096x128
  FP8ATTN_S9_LOOP_STAMPS=1 FP8ATTN_LOOP_SHAPE=$sh FP8ATTN_CUBIN=$w/$n.cubin timeout 120 bin/cuda.test -test.run 'TestStage9LoopTimeline' -test.v > $w/timeline-$n-$sh.txt 2>&1
  echo "== $n $sh"; grep -E "µs a call|warpgroup [01]|softmaxes" $w/timeline-$n-$sh.txt | sed 's/^ *//'
done
SHAPES="4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:causal" ROUNDS=1 OUT=$w timeout 250 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin "${ok[@]}" > $w/ab.txt 2>&1
tail -6 $w/ab.txt
tar czf $OUT/run4.tgz -C $w --exclude='*.cubin' .
