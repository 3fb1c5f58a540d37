#!/usr/bin/env bash
# Session 28, run 3: at D 64, the turn narrowed to the exponentials, and part of
# the exponentials on the FMA pipe (ex2_poly), validated, then timed in two
# rounds against the committed cubin (bin/old.cubin) on the long, D64 and D96 shapes:
#   smt0:   softmax turns (1), no issue turns (run 2's best at D 64);
#   sm3:    a turn is the exponentials and sums only (-DFP8ATTN_S9_SOFTMAX_TURNS=3), no issue turns;
#   sm3p2:  sm3 with 2 of every 8 weights by ex2_poly (-DFP8ATTN_S9_POLY_EXP=2);
#   sm3p3:  sm3 with 3 of every 8;
#   smt0p2: smt0 with 2 of every 8;
#   p2:     the committed schedule with 2 of every 8.
set -u
export OUT; name=run3; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r3; mkdir -p $w
T=-DFP8ATTN_S9_SOFTMAX_TURNS P0=-DFP8ATTN_S9_PINGPONG=0 X=-DFP8ATTN_S9_POLY_EXP
vs="smt0:$T=1,$P0 sm3:$T=3,$P0 sm3p2:$T=3,$P0,$X=2 sm3p3:$T=3,$P0,$X=3 smt0p2:$T=1,$P0,$X=2 p2:$X=2"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
names=$(for v in $vs; do echo -n "${v%%:*} "; done)
for n in $names; do
  echo "$n: $(for d in 64 96; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' '); "; done)"
  grep -E "error" $w/build-$n.log | head -5
  cuobjdump -sass -fun fp8attn_stage9_d64 $w/$n.cubin 2>/dev/null | grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z0-9.]+' | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -12 | tr '\n' ' ' > $w/sass-ops-$n.txt
  echo "  sass d64: $(cat $w/sass-ops-$n.txt)"
  FP8ATTN_CUBIN=$w/$n.cubin timeout 240 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1 &
done
wait
ok=()
for n in $names; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL|ratio' $w/tests-$n.txt | head -6
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n=$w/$n.cubin")
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96" ROUNDS=2 OUT=$w timeout 330 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin "${ok[@]}" > $w/ab.txt 2>&1
tail -5 $w/ab.txt
tar czf $OUT/run3.tgz -C $w --exclude='*.cubin' .
