#!/usr/bin/env bash
# Session 17, call 4: SPIPE with every step issuing and waiting the same
# (the last tile peeled off): the cubin built with SPIPE_MAXD 64 and 0, the
# ptxas serialization notes (C7514), the stage-9 tests on it, and timing of
# the two alternating, two rounds, if ptxas did not serialize.
set -uo pipefail
name=s17-spipe2
. scripts/gpu-lib.sh
unpack_bins
work=$(mktemp -d)
hf="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
declare -A var=([spipe64]="-DFP8ATTN_S9_SPIPE_MAXD=64" [spipe0]="-DFP8ATTN_S9_SPIPE_MAXD=0" [spipe96]="-DFP8ATTN_S9_SPIPE_MAXD=96")
for v in "${!var[@]}"; do
  (cd backend/cuda/kernels && nvcc $hf ${var[$v]} -cubin -Xptxas -v -o $work/$v.cubin attention_sm90a.cu > $work/$v.ptxas.log 2>&1) &
done
wait
for v in "${!var[@]}"; do echo "$v: $(grep -A2 'stage9_d' $work/$v.ptxas.log | grep -E 'spill' | sort | uniq -c | tr '\n' ' ') C7514: $(grep -o 'C7514.*function .[a-z0-9_]*' $work/$v.ptxas.log | sed 's/.*function//' | tr '\n' ' ')"; done
grep -q "C7514.*stage9_d64" $work/spipe64.ptxas.log && { echo "still serialized"; tar czf $OUT/s17-spipe2.tgz -C $work --exclude='*.cubin' .; exit 1; }
export FP8ATTN_PTX=$kernels_dir/attention_compute_89.ptx
(cd backend/cuda && FP8ATTN_SEED=17 FP8ATTN_CUBIN=$work/spipe64.cubin timeout 200 ../../bin/cuda.test -test.run 'TestFP8PAccuracy/stage9|TestConformance/cuda/stage9|TestAttentionQuantizingBitExact' -test.v -test.timeout 190s > $work/tests-spipe64.log 2>&1); echo "spipe64 tests rc $?"
grep -c -- "--- PASS" $work/tests-spipe64.log; grep -E -- "--- FAIL" $work/tests-spipe64.log | head
grep -oE "\{B:.*ratio [0-9.]+" $work/tests-spipe64.log | grep "D:64" | sed -E 's/relative L2 vs exact: //' | head -4
export SHAPES="2x8x256x256x64 1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96"
for r in 1 2; do
  order="spipe64 spipe0 spipe96"; [ $r = 2 ] && order="spipe0 spipe64"
  for v in $order; do
    mkdir -p $work/$v-r$r
    OUT=$work/$v-r$r PEERS=0 FP8ATTN_CUBIN=$work/$v.cubin bash scripts/hopper-bench.sh > $work/$v-r$r.log 2>&1 || echo "FAILED $v r$r"
    tar xzf $work/$v-r$r/hopper-bench.tgz -C $work/$v-r$r && rm -f $work/$v-r$r/hopper-bench.tgz
    grep -h "check  " $work/$v-r$r.log | grep -v PASS | head -2
  done
done
python3 scripts/hopper_ab.py $work | tee $work/ab.txt
tar czf $OUT/s17-spipe2.tgz -C $work --exclude='*.cubin' .
exit $status
