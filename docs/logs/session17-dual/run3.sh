#!/usr/bin/env bash
# Session 17, call 3: stage 9 with two score buffers, Q·K(t+1)ᵀ issued
# before the softmax of tile t (FP8ATTN_S9_SPIPE_MAXD, default 64), built by
# gen.sh; accuracy and conformance; graph-replay timing against the build
# without it (SPIPE_MAXD=0: the committed kernel) and with it up to D 96 and
# 128, the peers in round 1.
set -uo pipefail
name=s17-spipe
. scripts/gpu-lib.sh
unpack_bins
use_built_kernels
work=$(mktemp -d)
build_kernels || { cat $out/gen.log; exit 1; }
cp $kernels_dir/sm90a_build.log $work/default.ptxas.log
grep -A2 "stage9_d" $kernels_dir/resources.txt | grep -E "entry|spill|Used"
grep -E "C75[0-9][0-9]" $work/default.ptxas.log
hf="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
declare -A var=([spipe0]="-DFP8ATTN_S9_SPIPE_MAXD=0" [spipe96]="-DFP8ATTN_S9_SPIPE_MAXD=96" [spipe128]="-DFP8ATTN_S9_SPIPE_MAXD=128")
for v in "${!var[@]}"; do
  (cd backend/cuda/kernels && nvcc $hf ${var[$v]} -cubin -Xptxas -v -o $work/$v.cubin attention_sm90a.cu > $work/$v.ptxas.log 2>&1) &
done
export FP8ATTN_SEED=${FP8ATTN_SEED:-17}
(cd backend/cuda && timeout 240 ../../bin/cuda.test -test.run 'TestFP8PAccuracy|TestConformance/cuda/stage9|TestAttentionQuantizingBitExact' -test.v -test.timeout 230s > $work/tests-default.log 2>&1); echo "default tests rc $?"
grep -E "^(--- FAIL|FAIL|ok|PASS)" $work/tests-default.log | head; grep -c -- "--- PASS" $work/tests-default.log
grep -E -- "--- FAIL" $work/tests-default.log | head
grep -oE "\{B:.*ratio [0-9.]+" $work/tests-default.log | grep "stage 9" | sed -E 's/relative L2 vs exact: //' | head -12
wait
for v in "${!var[@]}"; do echo "$v: $(grep -A2 'stage9_d' $work/$v.ptxas.log | grep -E 'spill' | sort | uniq -c | tr '\n' ' ') $(grep -o 'C7514.*function .[a-z0-9_]*' $work/$v.ptxas.log | sed 's/.*function//' | tr '\n' ' ')"; done
(cd backend/cuda && FP8ATTN_CUBIN=$work/spipe96.cubin timeout 150 ../../bin/cuda.test -test.run 'TestFP8PAccuracy/stage9|TestConformance/cuda/stage9' -test.timeout 140s > $work/tests-spipe96.log 2>&1); echo "spipe96 tests rc $?"
unset FP8ATTN_SEED
export SHAPES="2x8x256x256x64 1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128"
for r in 1 2; do
  order="default spipe0 spipe96 spipe128"; [ $r = 2 ] && order="spipe0 default"
  for v in $order; do
    cub=$work/$v.cubin; peers=0
    [ $v = default ] && cub=$kernels_dir/attention_sm_90a.cubin
    [ $v = default ] && [ $r = 1 ] && peers=1
    mkdir -p $work/$v-r$r
    OUT=$work/$v-r$r PEERS=$peers FP8ATTN_CUBIN=$cub bash scripts/hopper-bench.sh > $work/$v-r$r.log 2>&1 || echo "FAILED $v r$r"
    tar xzf $work/$v-r$r/hopper-bench.tgz -C $work/$v-r$r && rm -f $work/$v-r$r/hopper-bench.tgz
    grep -h "check  " $work/$v-r$r.log | grep -v PASS | head -2
  done
done
grep -v Warning $work/default-r1/hopper-peers.log | grep -E "p50|unavailable" | sed -E 's/ +p90.*TFLOP/ TFLOP/'
python3 scripts/hopper_ab.py $work | tee $work/ab.txt
tar czf $OUT/s17-spipe.tgz -C $work --exclude='*.cubin' .
exit $status
