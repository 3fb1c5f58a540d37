#!/usr/bin/env bash
# Session 41, run 3: why the halves measured slower (run 2). The SASS of the
# D 64 and D 128 functions, base against halves (opcode counts), and halves
# with the first half rescaled unconditionally (HALVES=2, no vote, no
# branch), validated and timed in one round.
set -u
export OUT; name=run3; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r3; mkdir -p $w
vs="base: halves:-DFP8ATTN_S9_HALVES=1 nobranch:-DFP8ATTN_S9_HALVES=2"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
wait
for n in base halves nobranch; do
  for d in 64 128; do
    cuobjdump -sass -fun fp8attn_stage9_d$d $w/$n.cubin > $w/$n-d$d.sass 2>/dev/null
    echo "$n d$d: $(grep -cE '^ +/\*[0-9a-f]+\*/' $w/$n-d$d.sass) instrs; $(grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z0-9]+' $w/$n-d$d.sass | awk '{print $2}' | sort | uniq -c | sort -rn | head -16 | tr '\n' ' ')"
  done
done
FP8ATTN_CUBIN=$w/nobranch.cubin timeout 200 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' > $w/tests-nobranch.txt 2>&1; tail -1 $w/tests-nobranch.txt
SHAPES="1x8x2048x2048x64 4x32x4096x4096x128" ROUNDS=1 OUT=$w timeout 200 bash scripts/hopper-ab.sh base=$w/base.cubin halves=$w/halves.cubin nobranch=$w/nobranch.cubin > $w/ab.txt 2>&1
tail -4 $w/ab.txt
tar czf $OUT/$name.tgz -C $w --exclude='*.cubin' .
