#!/usr/bin/env bash
# Session 30, run 1: three consumer warpgroups at D 64 (BlockM 192, 512 threads, consumers at 160
# registers; without intra-warpgroup overlap by default). gen.sh builds this tree's defaults (new);
# variants from the same tree: noturn (no softmax turns), loose (Q·K(t)ᵀ issued with P(t-1)·V(t-1)),
# ovl (v19's overlap with one P set, at 160 registers), pp (GEMM turns instead of softmax turns).
# SASS of every stage-9 function against the committed cubin (bin/old.cubin); stage 9's conformance
# suite and TestFP8PAccuracy on each build, more tests on new; then one A/B round against v19
# (bin/old.cubin with bin/sdpabench-old, the old tile geometry); then the CPU: the FMA peak, the
# kernels and the side-by-side with PyTorch.
set -u
export OUT; name=run1; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels; w=/tmp/s30r1; mkdir -p $w
vs="noturn:-DFP8ATTN_S9_SOFTMAX_TURNS=0 loose:-DFP8ATTN_S9_SEQ_STRICT=0 ovl:-DFP8ATTN_S9_OVERLAP=1 pp:-DFP8ATTN_S9_SOFTMAX_TURNS=0,-DFP8ATTN_S9_PINGPONG=1"
for v in $vs; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o $w/$n.cubin attention_sm90a.cu > $w/build-$n.log 2>&1) &
done
build_kernels || { tail -40 $OUT/gen.log; grep -B2 -A3 error $k/sm90a_build.log | head -40; exit 1; }
wait
cp $k/sm90a_build.log $w/build-new.log; cp $k/attention_sm_90a.cubin $w/new.cubin
use_built_kernels
for n in new $(for v in $vs; do echo -n "${v%%:*} "; done); do
  echo "$n: $(for f in stage9_d64 stage9f_d64 stage9o_d64 stage9_d128; do echo -n "$f $(grep -A4 "fp8attn_$f'" $w/build-$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' '); "; done)"
  grep -E "error|C75" $w/build-$n.log | head -5
done
for f in $(cuobjdump -elf bin/old.cubin | grep -oE 'fp8attn_(stage9|pack9|quantpack9)[a-z]*_d[0-9]+' | sort -u); do
  a=$(cuobjdump -sass -fun $f bin/old.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  b=$(cuobjdump -sass -fun $f $w/new.cubin | grep -E '^ +/\*[0-9a-f]+\*/' | md5sum | cut -c1-8)
  [ "$a" = "$b" ] && echo "$f same" || echo "$f CHANGED"
done > $w/sass-compare.txt
echo "sass: $(grep -c same $w/sass-compare.txt) same; changed: $(grep CHANGED $w/sass-compare.txt | cut -d' ' -f1 | tr '\n' ' ')"
for n in noturn loose ovl pp; do
  [ -f $w/$n.cubin ] && FP8ATTN_CUBIN=$w/$n.cubin timeout 150 bin/cuda.test -test.run 'Conformance/cuda/stage9|FP8PAccuracy/stage9' -test.v > $w/tests-$n.txt 2>&1 &
done
timeout 200 bin/cuda.test -test.run 'Conformance|FP8PAccuracy|AttentionQuantizingBitExact|ConcurrentCalls|Stage9|Hopper' -test.skip PTXFresh -test.v > $w/tests-new.txt 2>&1 &
wait
timeout 100 bin/sdpa-cuda.test -test.run 'Device|Graph|Cache|Conformance' > $w/sdpa-tests-new.txt 2>&1; echo "sdpa tests new rc $?: $(tail -1 $w/sdpa-tests-new.txt)"
ok=("base=$PWD/bin/old.cubin@bin/sdpabench-old")
for n in new noturn loose ovl pp; do
  echo "tests $n: $(grep -c -- '--- FAIL' $w/tests-$n.txt) FAIL, $(grep -c -- '--- PASS' $w/tests-$n.txt) PASS, $(tail -1 $w/tests-$n.txt)"
  grep -E -- '--- FAIL' $w/tests-$n.txt | head -6; grep -E 'ratio' $w/tests-$n.txt | grep 'D:64' | head -4
  tail -1 $w/tests-$n.txt | grep -q '^PASS\|^ok' && ok+=("$n=$w/$n.cubin")
done
SHAPES="2x8x256x256x64 1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=1 OUT=$w timeout 200 bash scripts/hopper-ab.sh "${ok[@]}" > $w/ab.txt 2>&1
tail -6 $w/ab.txt
# The CPU (issue #11): one core's FMA peak and the kernels against it, MKL's sgemm on one thread,
# then ours beside PyTorch's SDPA (3 rounds, 1 and 16 threads).
GOMAXPROCS=1 timeout 60 bin/cpu.test -test.run XXX -test.bench 'PeakFMA|Kernels/(scores4|scoresSoftmax4|pv4)/avx512|CPU/mission/fp32/avx512' -test.count 3 > $w/cpu-bench.txt 2>&1
grep -E "^Benchmark" $w/cpu-bench.txt | awk '{print $1, $(NF-1), $NF}' | sort | awk '{a[$1]=a[$1]" "$2} END {for (k in a) print k, a[k]}' | sort
timeout 60 python3 - > $w/torch-gemm.txt 2>&1 <<'PY'
import time, torch
torch.set_num_threads(1)
for n in (1024, 2048):
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3): a @ b
    best = []
    for _ in range(5):
        t = time.perf_counter(); a @ b; best.append(time.perf_counter() - t)
    best.sort()
    print(f"torch {torch.__version__} sgemm {n}x{n}x{n}, 1 thread: median {2*n**3/best[2]/1e9:.1f} GFLOP/s, best {2*n**3/best[0]/1e9:.1f}")
PY
cat $w/torch-gemm.txt
ROUNDS=3 OUT=$w/cpu timeout 150 bash scripts/cpu-side-by-side.sh > $w/cpu-sbs.txt 2>&1; grep MEDIAN $w/cpu-sbs.txt
tar czf $OUT/run1.tgz -C $w --exclude='*.cubin' .
