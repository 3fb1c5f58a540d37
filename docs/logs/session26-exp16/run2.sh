#!/usr/bin/env bash
# Session 26, run 2 (tree bb3696c + the GQA case of BenchmarkDeviceQuantizeAttention):
# (1) the fused step on the mission, long and GQA shapes (embedded kernels);
# (2) what promotion and the tensor-core row sums cost at D 64, each alone:
#     builds of the committed source with FP8ATTN_S9_PROMOTE / _LSUM off, A/B in
#     one run on the D 64 shapes (scripts/hopper-ab.sh);
# (3) Nsight Compute on the D 64 tiled kernel, committed build and PROMOTE=0.
set -u
export OUT; name=run2; . scripts/gpu-lib.sh; unpack_bins
k=backend/cuda/kernels
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt"
mkdir -p /tmp/v
for v in p0l1:-DFP8ATTN_S9_PROMOTE=0 p1l0:-DFP8ATTN_S9_LSUM=0 p0l0:-DFP8ATTN_S9_PROMOTE=0,-DFP8ATTN_S9_LSUM=0; do
  n=${v%%:*} f=${v#*:}
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${f//,/ } -o /tmp/v/$n.cubin attention_sm90a.cu > /tmp/v/$n.log 2>&1) &
done
env -u FP8ATTN_CUBIN bin/cuda.test -test.run '^$' -test.bench DeviceQuantizeAttention -test.benchtime 2000x -test.count 2 > "$OUT/fused.txt" 2>&1
grep -E '^Benchmark' "$OUT/fused.txt"
wait
for n in p0l1 p1l0 p0l0; do
  echo "$n: $(grep -A4 "stage9_d64'" /tmp/v/$n.log | grep -oE '[0-9]+ bytes spill stores|Used [0-9]+ registers' | tr '\n' ' ') $(grep -c C7514 /tmp/v/$n.log) C7514"
  cp /tmp/v/$n.log "$OUT/build-$n.log"
done
SHAPES="2x8x256x256x64 1x8x2048x2048x64 4x32x4096x4096x64" ROUNDS=2 timeout 360 bash scripts/hopper-ab.sh \
  base=$PWD/$k/attention_sm_90a.cubin p0l1=/tmp/v/p0l1.cubin p1l0=/tmp/v/p1l0.cubin p0l0=/tmp/v/p0l0.cubin > "$OUT/ab.txt" 2>&1
tail -12 "$OUT/ab.txt"
for n in base p0l1; do
  c=$PWD/$k/attention_sm_90a.cubin; [ $n = base ] || c=/tmp/v/$n.cubin
  FP8ATTN_CUBIN=$c timeout 150 ncu --set full --import-source no --clock-control none --warp-sampling-interval 2 \
    -k 'regex:fp8attn_stage9_d64' -s 2 -c 1 -f -o /tmp/$n bin/sdpabench -kernel stage9 -shapes 1x32x4096x4096x64 -nocheck -iters 3 \
    > "$OUT/ncu-run-$n.txt" 2>&1 || echo "ncu $n rc $?"
  ncu -i /tmp/$n.ncu-rep --page details > "$OUT/ncu-$n.txt" 2>&1
  ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-source-$n.csv" 2>&1
  python3 scripts/ncu-stalls.py "$OUT/ncu-source-$n.csv" 30 > "$OUT/stalls-$n.txt" 2>&1
  gzip -f "$OUT/ncu-source-$n.csv"
  echo "== $n"; grep -E "Duration|Elapsed Cycles|Issue Slots Busy|Executed Ipc A|No Eligible|Registers Per" "$OUT/ncu-$n.txt" | head -8; head -4 "$OUT/stalls-$n.txt"
done
