#!/usr/bin/env bash
# Session 27, run 6: v17, Q·Kᵀ without the k steps of zero columns past D (D 96: 3 steps of 4, D 192:
# 6 of 8), built by gen.sh (OUT/kernels.tgz) and validated: the whole backend suite (TestPTXFresh
# skipped), the sdpa device tests, memcheck, synccheck and racecheck on stage 9's d96 and d192
# conformance cases, memcheck on TestFP8PAccuracy; then against v16 (bin/old.cubin, 11850ba) at D 96
# and 192, two rounds.
set -u
export OUT; name=run6; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/r6; mkdir -p $w
build_kernels || { tail -30 $OUT/gen.log; exit 1; }
use_built_kernels
grep -A2 "stage9_d\(96\|192\)'" $k/resources.txt | grep -E "spill|Compiling" | paste - - | sed 's/Compiling entry function//'
timeout 280 bin/cuda.test -test.skip 'PTXFresh' -test.timeout 270s > $w/cuda-tests.txt 2>&1; echo "backend suite rc $?: $(tail -1 $w/cuda-tests.txt)"
grep -E -- '--- FAIL' $w/cuda-tests.txt | head
timeout 100 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests.txt 2>&1; echo "sdpa tests rc $?: $(tail -1 $w/sdpa-tests.txt)"
timeout 120 bin/cuda.test -test.run 'FP8PAccuracy/stage9' -test.v > $w/accuracy.txt 2>&1; echo "accuracy rc $?: $(grep -c ratio $w/accuracy.txt) lines"
for tool in memcheck synccheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run 'Conformance/cuda/stage9/(d96|d192)' -test.timeout 85s > $w/$tool.txt 2>&1
  echo "$tool rc $?: $(grep SUMMARY $w/$tool.txt)"
done
SHAPES="4x32x4096x4096x96 4x32x4096x4096x192" ROUNDS=2 OUT=$w timeout 120 bash scripts/hopper-ab.sh v17=$FP8ATTN_CUBIN v16=$PWD/bin/old.cubin > $w/ab.txt 2>&1
tail -3 $w/ab.txt
tar czf $OUT/run6.tgz -C $w .
