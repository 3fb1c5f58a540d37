#!/usr/bin/env bash
# Session 26, run 3: two builds of the tiled D 64 kernel against the committed one:
#   dual: -DFP8ATTN_S9_DUALOT=1 (two tile accumulators in turn, the fold under Q·K(t)ᵀ);
#   pp:   -DFP8ATTN_S9_PINGPONG=1 (ping-pong, last measured before promotion, session 9);
# each validated (stage 9's conformance suite and TestFP8PAccuracy) before it is timed
# (scripts/hopper-ab.sh, two rounds).
set -u
export OUT; name=run3; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r3; mkdir -p $w
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $w/device.txt
for v in dual:-DFP8ATTN_S9_DUALOT=1 pp:-DFP8ATTN_S9_PINGPONG=1 src:-DFP8ATTN_S9_DUALOT=0; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
cmp $w/src.cubin $k/attention_sm_90a.cubin && echo "src: the committed cubin, byte for byte"
for n in dual pp; do
  echo "$n: $(grep -A4 "stage9_d64'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ') C7514: $(grep -c C7514 $w/build-$n.log)"
  grep -E "error" $w/build-$n.log | head -5
done
ok=()
for n in dual pp; do
  [ -s $w/$n.cubin ] || continue
  FP8ATTN_CUBIN=$w/$n.cubin timeout 240 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1
  rc=$?; echo "tests $n rc $rc: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -5
  [ $rc = 0 ] && ok+=("$n=$w/$n.cubin")
done
SHAPES="1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:causal" ROUNDS=2 OUT=$w timeout 400 \
  bash scripts/hopper-ab.sh base=$PWD/$k/attention_sm_90a.cubin "${ok[@]}" > $w/ab.txt 2>&1
tail -8 $w/ab.txt
tar czf $OUT/run3.tgz -C $w .
