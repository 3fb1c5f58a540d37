#!/usr/bin/env bash
# Session 29, run 3: P(t-1)·V(t-1) issued a k step at a time between the quarters of
# tile t's exponentials (FP8ATTN_S9_PV_IN_SOFTMAX=1), and ping-pong with P·V in one part
# at D 128 (possible without spills once P is in shared memory), validated, then timed
# in one round against this tree's default build:
#   pis:    PV_IN_SOFTMAX=1 (P from registers);
#   pisss:  PV_IN_SOFTMAX=1, P from shared memory, one part at D 128;
#   pispp:  PV_IN_SOFTMAX=1 with ping-pong at every head dim, no softmax turns;
#   sspp1:  P from shared memory, one part at D 128, ping-pong at every head dim, no softmax turns.
set -u
export OUT; name=run3; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s29r3; mkdir -p $w
I=-DFP8ATTN_S9_PV_IN_SOFTMAX=1 S=-DFP8ATTN_S9_PV_SS=1 P1=-DFP8ATTN_S9_PARTS_D128=1 PP=-DFP8ATTN_S9_PINGPONG=1,-DFP8ATTN_S9_SOFTMAX_TURNS=0
vs="base:-DFP8ATTN_S9_PV_SS=0 pis:$I pisss:$I,$S,$P1 pispp:$I,$PP sspp1:$S,$P1,$PP"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
names=$(for v in $vs; do echo -n "${v%%:*} "; done)
for n in $names; do
  echo "$n: $(for d in 64 96 128 192 256; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' '); "; done) C7514: $(grep -c C7514 $w/build-$n.log)"
  grep -E "error" $w/build-$n.log | head -5
  cuobjdump -sass -fun fp8attn_stage9_d128 $w/$n.cubin > $w/sass-$n-d128.txt 2>/dev/null
  # the loop's order of GEMM issues, exponentials and waits, as runs
  grep -oE 'QGMMA|MUFU\.EX2|WARPGROUP\.(DEPBAR|ARRIVE)|STSM|BAR\.(SYNC|ARV)' $w/sass-$n-d128.txt | uniq -c | awk '{printf "%s%s ", $2, ($1>1?"x"$1:"")}' > $w/seq-$n-d128.txt
  echo "  d128 sequence: $(cut -c1-900 $w/seq-$n-d128.txt)"
  [ -f $w/$n.cubin ] && FP8ATTN_CUBIN=$w/$n.cubin timeout 280 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1 &
done
wait
ok=()
for n in $names; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -4
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n=$w/$n.cubin")
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x128 4x32x4096x4096x256" ROUNDS=1 OUT=$w timeout 250 \
  bash scripts/hopper-ab.sh "${ok[@]}" > $w/ab.txt 2>&1
tail -6 $w/ab.txt
tar czf $OUT/run3.tgz -C $w --exclude='*.cubin' .
