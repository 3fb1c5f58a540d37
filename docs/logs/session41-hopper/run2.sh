#!/usr/bin/env bash
# Session 41, run 2: the tiled softmax in halves (FP8ATTN_S9_HALVES=1), built
# beside the same tree's default (base: the committed kernels' source), its
# resources, stage 9's conformance cases and TestFP8PAccuracy on it, then two
# rounds of scripts/hopper-ab.sh on issue #10's tiled shapes.
set -u
export OUT; name=run2; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r2; mkdir -p $w
vs="base: halves:-DFP8ATTN_S9_HALVES=1 ${EXTRA:-}"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
names=$(for v in $vs; do echo -n "${v%%:*} "; done)
for n in $names; do
  echo "$n: $(for d in 64 96 128 192 256; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' '); "; done)"
  grep -E "error" $w/build-$n.log | head -5
  [ -f $w/$n.cubin ] && FP8ATTN_CUBIN=$w/$n.cubin timeout 280 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' -test.v > $w/tests-$n.txt 2>&1 &
done
wait
ok=()
for n in $names; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL lines, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS lines, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL|ratio' $w/tests-$n.txt | head -8
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n=$w/$n.cubin")
done
SHAPES=${SHAPES:-"1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:causal 4x32x4096x4096x256"} \
  ROUNDS=${ROUNDS:-2} OUT=$w timeout 400 bash scripts/hopper-ab.sh "${ok[@]}" > $w/ab.txt 2>&1
tail -12 $w/ab.txt
tar czf $OUT/$name.tgz -C $w --exclude='*.cubin' .
