#!/usr/bin/env bash
# Session 27, run 3: the v16 kernels (P·V in two column parts at D 128, four at D 256) built by
# gen.sh (OUT/kernels.tgz) and validated with them: the whole backend suite (TestPTXFresh skipped:
# the binary embeds the earlier source hash) and the sdpa device tests; beside it a build with D 192
# in three parts (-DFP8ATTN_S9_PARTS_D192=3), validated (stage 9's conformance suite,
# TestFP8PAccuracy) for run 4 to time.
set -u
export OUT; name=run3; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r3; mkdir -p $w
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -DFP8ATTN_S9_PARTS_D192=3 -o $w/p3.cubin attention_sm90a.cu > $w/build-p3.log 2>&1) &
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
wait
use_built_kernels
grep -A2 "stage9_d\(64\|96\|128\|192\|256\)'" $k/resources.txt | grep -E "spill|Compiling" | paste - - | sed 's/Compiling entry function//'
echo "p3 d192: $(grep -A4 "fp8attn_stage9_d192'" $w/build-p3.log | grep -oE '[0-9]+ bytes spill stores' | head -1)"
timeout 280 bin/cuda.test -test.skip 'PTXFresh' -test.timeout 270s > $w/cuda-tests.txt 2>&1; echo "backend suite rc $?: $(tail -1 $w/cuda-tests.txt)"
grep -E -- '--- FAIL' $w/cuda-tests.txt | head
timeout 100 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests.txt 2>&1; echo "sdpa tests rc $?: $(tail -1 $w/sdpa-tests.txt)"
FP8ATTN_CUBIN=$w/p3.cubin timeout 100 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy' > $w/tests-p3.txt 2>&1
echo "tests p3 rc $?: $(tail -1 $w/tests-p3.txt)"
cp $w/p3.cubin $OUT/p3.cubin
tar czf $OUT/run3.tgz -C $w --exclude p3.cubin .
