#!/usr/bin/env bash
# Runs on the GPU machine from the repository root with bin/cuda.test
# (gzipped is fine): Nsight Compute's duration, active cycles of the least
# and most busy SM, DRAM throughput and bytes for the paged decode kernels
# on BenchmarkPagedDecode's shapes (the warp-specialized kernel and the
# cp.async one):
# how much of a call the slowest SM's tail and the ramp take.
set -u
out=${OUT:-out}; mkdir -p $out
for z in bin/*.gz; do gunzip -f $z; done; chmod +x bin/*
M=gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,sm__cycles_elapsed.max,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum
for k in 'B8.*/paged$' 'B1-.*/paged$' 'B64.*/paged$' 'B8.*/paged-cp.async' 'B1-.*/paged-cp.async'; do
  echo "== $k"
  timeout 120 ncu --metrics $M --clock-control none -k 'regex:fp8attn_paged_(ws_d128|d128|merge)' -c 2 bin/cuda.test -test.run '^$' -test.bench "PagedDecode\$/$k" -test.benchtime 1x 2>&1 | grep -E "fp8attn|gpu__time|sm__cycles|dram__" | sed 's/  */ /g'
done
