#!/usr/bin/env bash
# Session 42, run 2: the SM clock and power while issue #10's large shapes
# run, ours (stage 9, sdpabench graph replay) and the peers
# (bench/hopper_peers.py), sampled by nvidia-smi every 20 ms; run 1
# (fp8gemm.py) saw cuBLASLt's FP8 product hold the SM clock at 1455 MHz
# against the 700 W limit.
set -u
export OUT; . scripts/gpu-lib.sh; unpack_bins
w=/tmp/r2; mkdir -p $w
sample() { nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 > "$w/clock-$1.csv" & echo $!; }
for s in 4x32x4096x4096x128 4x32x4096x4096x256 4x32x4096x4096x64; do
  p=$(sample ours-$s); sleep 0.5
  SHAPES=$s PEERS=0 OUT=$w/hb-$s bash scripts/hopper-bench.sh 2>&1 | tee -a $w/ours.txt
  kill $p
  p=$(sample peers-$s); sleep 0.5
  python3 bench/hopper_peers.py $w/peers-$s.json $s 2>&1 | grep -v Warning | tee -a $w/peers.txt
  kill $p
done
for f in $w/clock-*.csv; do
  # Samples under load (power above 300 W): median SM clock and power.
  python3 - "$f" <<'PY'
import sys, statistics
rows = [l.split(',') for l in open(sys.argv[1]) if l.count(',') == 2]
load = [(float(c), float(p)) for _, c, p in rows if float(p) > 300]
name = sys.argv[1].rsplit('/', 1)[1]
if load:
    print(f"{name}: {len(load)} samples above 300 W, SM clock median {statistics.median(c for c, _ in load):.0f} MHz "
          f"(min {min(c for c, _ in load):.0f}), power median {statistics.median(p for _, p in load):.0f} W")
else:
    print(f"{name}: no samples above 300 W ({len(rows)} samples)")
PY
done | tee $w/clocks.txt
tar czf $OUT/run2.tgz -C $w .
