#!/usr/bin/env bash
# Session 29, run 1: P·V with P from shared memory (wgmma SS, FP8ATTN_S9_PV_SS=1),
# built from this tree, validated (stage 9's conformance suite, TestFP8PAccuracy),
# then timed in one round against the same tree's default build (base, P from
# registers; its dynamic shared memory is the new HopperConfig.SharedBytes too):
#   ss:    P·V SS at every head dim;
#   ssp:   ss with P·V in one column part at D 128 and two at D 256 (P's registers freed);
#   sst0:  ss without softmax turns (ping-pong's default then includes D 64);
#   sspp:  ss with ping-pong at every head dim and no softmax turns.
set -u
export OUT; name=run1; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r1; mkdir -p $w
S=-DFP8ATTN_S9_PV_SS=1
vs="base:-DFP8ATTN_S9_PV_SS=0 ss:$S ssp:$S,-DFP8ATTN_S9_PARTS_D128=1,-DFP8ATTN_S9_PARTS_D256=2 sst0:$S,-DFP8ATTN_S9_SOFTMAX_TURNS=0 sspp:$S,-DFP8ATTN_S9_SOFTMAX_TURNS=0,-DFP8ATTN_S9_PINGPONG=1"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
names=$(for v in $vs; do echo -n "${v%%:*} "; done)
for n in $names; do
  echo "$n: $(for d in 64 96 128 192 256; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' '); "; done)"
  grep -E "error" $w/build-$n.log | head -5
  for d in 64 128; do
    cuobjdump -sass -fun fp8attn_stage9_d$d $w/$n.cubin 2>/dev/null | grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z0-9.]+' | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -14 | tr '\n' ' ' > $w/sass-ops-$n-d$d.txt
    echo "  sass d$d: $(cat $w/sass-ops-$n-d$d.txt)"
  done
  [ -f $w/$n.cubin ] && FP8ATTN_CUBIN=$w/$n.cubin timeout 280 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1 &
done
wait
ok=()
for n in $names; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL|ratio' $w/tests-$n.txt | head -6
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n=$w/$n.cubin")
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x128 4x32x4096x4096x256" ROUNDS=1 OUT=$w timeout 240 \
  bash scripts/hopper-ab.sh "${ok[@]}" > $w/ab.txt 2>&1
tail -8 $w/ab.txt
tar czf $OUT/run1.tgz -C $w --exclude='*.cubin' .
