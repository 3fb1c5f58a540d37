#!/usr/bin/env bash
# Session 16, call 5: the final build (gen.sh), the full suites on it, and
# stage 9 timed in graph replay beside its peers and the running-accumulator
# build (two rounds, alternating).
set -uo pipefail
name=s16-final
. scripts/gpu-lib.sh
unpack_bins
use_built_kernels
work=$(mktemp -d)
build_kernels || { cat $out/gen.log; exit 1; }
grep -A2 "stage9_d" $kernels_dir/resources.txt | grep -E "entry|spill"
grep -i "warning" $out/gen.log | head -5
hf="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
(cd backend/cuda/kernels && nvcc $hf -DFP8ATTN_S9_PROMOTE=0 -DFP8ATTN_S9_LSUM=0 -cubin -o $work/running.cubin attention_sm90a.cu) &
export FP8ATTN_SEED=${FP8ATTN_SEED:-1623}
(cd backend/cuda && timeout 300 ../../bin/cuda.test -test.v -test.timeout 290s > $work/full.log 2>&1); echo "backend suite rc $?"
grep -E "^(--- FAIL|FAIL|ok|PASS)" $work/full.log | head; grep -c -- "--- PASS" $work/full.log
grep -oE "\{B:.*ratio [0-9.]+" $work/full.log | grep "stage 0" | sed -E 's/relative L2 vs exact: //'
(cd sdpa && timeout 200 ../bin/sdpa-cuda.test -test.timeout 190s > $work/sdpa.log 2>&1); echo "sdpa rc $?"; tail -1 $work/sdpa.log
wait
unset FP8ATTN_SEED
for r in 1 2; do
  order="final running"; [ $r = 2 ] && order="running final"
  for v in $order; do
    cub=$kernels_dir/attention_sm_90a.cubin; peers=0
    [ $v = running ] && cub=$work/running.cubin
    [ $v = final ] && [ $r = 1 ] && peers=1
    mkdir -p $work/$v-r$r
    OUT=$work/$v-r$r PEERS=$peers FP8ATTN_CUBIN=$cub bash scripts/hopper-bench.sh > $work/$v-r$r.log 2>&1 || echo "FAILED $v r$r"
    tar xzf $work/$v-r$r/hopper-bench.tgz -C $work/$v-r$r && rm -f $work/$v-r$r/hopper-bench.tgz
    grep -h "check  " $work/$v-r$r.log | sed "s/(tolerance.*//"
  done
done
grep -v Warning $work/final-r1/hopper-peers.log | grep -E "p50|unavailable" | sed -E 's/ +p90.*TFLOP/ TFLOP/'
python3 scripts/hopper_ab.py $work | tee $work/ab.txt
bin/sdpabench -shapes mission -backend cuda -iters 2000 > $work/mission-default.log 2>&1; tail -2 $work/mission-default.log
tar czf $OUT/s16-final.tgz -C $work --exclude='*.cubin' .
