#!/usr/bin/env bash
# Session 30, run 2: the one-tile form in two consumer warpgroups (v20 candidate: warpgroup h takes
# K/V tile h; row maxima exchanged; warpgroup 1's P·V and sums added by warpgroup 0). gen.sh builds
# this tree; the broken build (FP8ATTN_S9_BROKEN_SPLIT=1: no max exchange) must fail. SASS of every
# stage-9 function against the committed cubin; the backend suite, sdpa device tests, the
# sanitizers on TestAttentionQuantizingBitExact; the mission shape against v19 (old cubin and
# binaries) in two rounds, and BenchmarkDeviceQuantizeAttention (issue #12) both ways; then the CPU
# side by side with PyTorch at 1 thread, 9 rounds.
set -u
export OUT; name=run2; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s30r2; mkdir -p $w
(cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -DFP8ATTN_S9_BROKEN_SPLIT=1 -o $w/broken.cubin attention_sm90a.cu > $w/build-broken.log 2>&1) &
build_kernels || { tail -40 $OUT/gen.log; exit 1; }
wait
cp $k/attention_sm_90a.cubin $w/new.cubin; cp $k/resources.txt $w/
use_built_kernels
grep -A2 -E "stage9(o|fo|qo)_d64'|stage9_d64'" $k/resources.txt | grep -E "spill|Used|Compiling" | paste - - - | sed 's/Compiling entry function//'
grep -E "stage9[a-z]*_d64 QGMMA" $k/resources.txt
for f in $(cuobjdump -elf bin/old.cubin | grep -oE 'fp8attn_(stage9|pack9|quantpack9)[a-z]*_d[0-9]+' | sort -u); do
  a=$(cuobjdump -sass -fun $f bin/old.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  b=$(cuobjdump -sass -fun $f $w/new.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  [ "$a" = "$b" ] && echo "$f same" || echo "$f CHANGED"
done > $w/sass-compare.txt
echo "sass: $(grep -c same $w/sass-compare.txt) same; changed: $(grep CHANGED $w/sass-compare.txt | cut -d' ' -f1 | tr '\n' ' ')"
FP8ATTN_CUBIN=$w/broken.cubin timeout 120 bin/cuda.test -test.run 'Conformance/cuda/stage9|AttentionQuantizingBitExact' -test.v > $w/tests-broken.txt 2>&1 &
timeout 280 bin/cuda.test -test.skip PTXFresh -test.timeout 270s -test.v > $w/cuda-tests.txt 2>&1; echo "backend suite rc $?: $(tail -1 $w/cuda-tests.txt)"
wait
grep -E -- '--- FAIL' $w/cuda-tests.txt | head
grep -E 'ratio' $w/cuda-tests.txt | grep 'D:64' | head -4
echo "broken: $(grep -c -- '--- FAIL' $w/tests-broken.txt) FAIL lines: $(grep -- '--- FAIL' $w/tests-broken.txt | head -4 | tr '\n' ' ')"
timeout 100 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests.txt 2>&1; echo "sdpa tests rc $?: $(tail -1 $w/sdpa-tests.txt)"
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool bin/cuda.test -test.run 'AttentionQuantizingBitExact|Conformance/cuda/stage9/(short-keys|keys129|long-keys)' > $w/$tool.txt 2>&1 &
done
wait
for tool in memcheck racecheck synccheck; do echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $w/$tool.txt | tail -1) $(tail -1 $w/$tool.txt)"; done
SHAPES="2x8x256x256x64" ROUNDS=2 OUT=$w timeout 60 bash scripts/hopper-ab.sh "v19=$PWD/bin/old.cubin@bin/sdpabench-old" "v20=$w/new.cubin" > $w/ab.txt 2>&1
tail -3 $w/ab.txt
for r in 1 2; do
  FP8ATTN_CUBIN=$PWD/bin/old.cubin timeout 60 bin/cuda-old.test -test.run XXX -test.bench DeviceQuantizeAttention > $w/qa-v19-r$r.txt 2>&1
  timeout 60 bin/cuda.test -test.run XXX -test.bench DeviceQuantizeAttention > $w/qa-v20-r$r.txt 2>&1
done
grep -h Benchmark $w/qa-v19-r*.txt | sed 's/^/v19 /'; grep -h Benchmark $w/qa-v20-r*.txt | sed 's/^/v20 /'
ROUNDS=9 THREADS=1 OUT=$w/cpu timeout 200 bash scripts/cpu-side-by-side.sh > $w/cpu-sbs.txt 2>&1; grep MEDIAN $w/cpu-sbs.txt
tar czf $OUT/run2.tgz -C $w --exclude='*.cubin' .
