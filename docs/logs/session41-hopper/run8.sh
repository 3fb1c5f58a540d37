#!/usr/bin/env bash
# Session 41, run 8: what the row maxima cost the tiled kernel, as a bound:
# a diagnostic build without them (nomax.patch, FP8ATTN_S9_DIAG_NOMAX=1: a
# constant maximum, wrong outputs, timed only) against the same tree's
# default, one round of scripts/hopper-ab.sh without validation (PEERS=0;
# the mission and long shapes' oracle checks fail for nomax by design).
set -u
export OUT; name=run8; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r8; mkdir -p $w
patch -p1 < docs/logs/session41-hopper/nomax.patch
for v in base: nomax:-DFP8ATTN_S9_DIAG_NOMAX=1; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v $f -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
for n in base nomax; do
  echo "$n: $(grep -A4 "fp8attn_stage9_d64'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ')"
done
SHAPES="4x32x4096x4096x64 4x32x4096x4096x128" ROUNDS=2 OUT=$w timeout 300 bash scripts/hopper-ab.sh base=$w/base.cubin nomax=$w/nomax.cubin > $w/ab.txt 2>&1
tail -4 $w/ab.txt
tar czf $OUT/$name.tgz -C $w --exclude='*.cubin' .
