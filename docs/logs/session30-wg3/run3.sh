#!/usr/bin/env bash
# Session 30, run 3 (diagnostic): how much three consumer warpgroups with v19's overlap lose to their
# spills. wg3.patch's kernels (bin/wg3src.tgz, built in a copy of the kernel folder) with
# FP8ATTN_S9_OVERLAP=1 (ovl, as run 1), without the tensor-core row sums (LSUM=0: fewer registers, the
# old normalizer; not shippable), without softmax turns, and both; stage 9's conformance cases; then two
# rounds at B4 H32 S4096 D64 against v19 (the committed cubin with bin/sdpabench-old).
set -u
export OUT; name=run3; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/s30r3; mkdir -p $w/src
k=backend/cuda/kernels-wg3; rm -rf $k; cp -r backend/cuda/kernels $k
tar xzf bin/wg3src.tgz -C $w/src && cp $w/src/backend/cuda/kernels/* $k/
O=-DFP8ATTN_S9_OVERLAP=1
vs="ovl:$O ovlnl:$O,-DFP8ATTN_S9_LSUM=0 ovlnt:$O,-DFP8ATTN_S9_SOFTMAX_TURNS=0 ovlnlnt:$O,-DFP8ATTN_S9_LSUM=0,-DFP8ATTN_S9_SOFTMAX_TURNS=0"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
ok=("v19=$PWD/bin/old.cubin@bin/sdpabench-old")
for v in $vs; do
  n=${v%%:*}
  echo "$n: $(grep -A4 "fp8attn_stage9_d64'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores' | tr '\n' ' ') $(grep -m3 error $w/build-$n.log)"
  FP8ATTN_CUBIN=$w/$n.cubin timeout 60 bin/cuda.test -test.run 'Conformance/cuda/stage9' > $w/tests-$n.txt 2>&1
  echo "  tests: $(tail -1 $w/tests-$n.txt)"
  tail -1 $w/tests-$n.txt | grep -q '^PASS' && ok+=("$n=$w/$n.cubin")
done
SHAPES="4x32x4096x4096x64" ROUNDS=2 OUT=$w timeout 150 bash scripts/hopper-ab.sh "${ok[@]}" > $w/ab.txt 2>&1
tail -3 $w/ab.txt
rm -rf $k
tar czf $OUT/run3.tgz -C $w --exclude='*.cubin' --exclude=src .
