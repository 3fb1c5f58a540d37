#!/usr/bin/env bash
# Session 28, run 2: softmax turns in two forms and with or without issue turns,
# validated, then timed in two rounds against the committed cubin (bin/old.cubin):
#   smt0: a turn is the softmax (-DFP8ATTN_S9_SOFTMAX_TURNS=1), no issue turns (-DFP8ATTN_S9_PINGPONG=0);
#   smp0: a turn is the softmax and P's packing (=2), no issue turns;
#   smt1: a turn is the softmax, issue turns at every head dim (-DFP8ATTN_S9_PINGPONG=1);
#   smp1: softmax and packing, issue turns at every head dim.
# The D 64 shapes (long, D64, D96) take all four; D 128, 192 and 256 smt1 and smp1.
set -u
export OUT; name=run2; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r2; mkdir -p $w
for v in src: smt0:-DFP8ATTN_S9_SOFTMAX_TURNS=1,-DFP8ATTN_S9_PINGPONG=0 smp0:-DFP8ATTN_S9_SOFTMAX_TURNS=2,-DFP8ATTN_S9_PINGPONG=0 \
    smt1:-DFP8ATTN_S9_SOFTMAX_TURNS=1,-DFP8ATTN_S9_PINGPONG=1 smp1:-DFP8ATTN_S9_SOFTMAX_TURNS=2,-DFP8ATTN_S9_PINGPONG=1; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
cmp $w/src.cubin bin/old.cubin && echo "src: identical to the committed cubin"
for n in smt0 smp0 smt1 smp1; do
  echo "$n: $(for d in 64 96 128 192 256; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores' | head -1); "; done)"
  grep -E "error" $w/build-$n.log | head -5
  FP8ATTN_CUBIN=$w/$n.cubin timeout 200 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1 &
done
wait
ok=()
for n in smt0 smp0 smt1 smp1; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -5
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n")
done
pick() { for n in "$@"; do [[ " ${ok[*]} " == *" $n "* ]] && echo "$n=$w/$n.cubin"; done; }
mkdir -p $w/a $w/b
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96" ROUNDS=2 OUT=$w/a timeout 260 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin $(pick smt0 smp0 smt1 smp1) > $w/ab-d64.txt 2>&1
tail -5 $w/ab-d64.txt
SHAPES="4x32x4096x4096x128 4x32x4096x4096x192 4x32x4096x4096x256" ROUNDS=2 OUT=$w/b timeout 200 \
  bash scripts/hopper-ab.sh base=$PWD/bin/old.cubin $(pick smt1 smp1) > $w/ab-d128.txt 2>&1
tail -5 $w/ab-d128.txt
tar czf $OUT/run2.tgz -C $w --exclude='*.cubin' .
