#!/usr/bin/env bash
# Session 25, run 6: run 5 again with the densest warp sampling (every 32 cycles),
# on the one-tile kernel and on the quantizing form (fused, from the benchmark).
set -u
export OUT; name=run6; . scripts/gpu-lib.sh; unpack_bins
prof() { # name regex command...
  local n=$1 k=$2; shift 2
  timeout 200 ncu -f --cache-control none --set full --import-source no --clock-control none --warp-sampling-interval 0 -k "regex:$k" -s 5 -c 1 -o /tmp/$n "$@" \
    > "$OUT/ncu-run-$n.txt" 2>&1 || echo "ncu $n rc $?"
  ncu -i /tmp/$n.ncu-rep --page details > "$OUT/ncu-$n.txt" 2>&1
  ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass | gzip > "$OUT/ncu-source-$n.csv.gz"
}
prof one 'fp8attn_stage9o_d64' bin/sdpabench -kernel stage9 -shapes mission -nocheck -iters 20
prof qo 'fp8attn_stage9qo_d64' bin/cuda.test -test.run '^$' -test.bench 'DeviceQuantizeAttention' -test.benchtime 20x
grep -h -E "Elapsed Cycles|SM Active Cycles|Duration" "$OUT"/ncu-one.txt "$OUT"/ncu-qo.txt
