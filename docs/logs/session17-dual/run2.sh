#!/usr/bin/env bash
# Session 17, call 2: the peers' accuracy on TestFP8PAccuracy's inputs
# (bench/peer_accuracy.py, two seeds), and stage 9's per-call time on small
# problems (graph replay) to see what of the mission call is fixed latency.
set -uo pipefail
name=s17-small
. scripts/gpu-lib.sh
unpack_bins
work=$(mktemp -d)
(cd bench && for s in 16 17; do python3 peer_accuracy.py $s; done) 2>&1 | grep -v Warning | tee $work/peer-accuracy.txt
for shapes in 1x1x64x64x64 1x1x128x128x64 1x1x256x256x64 1x2x256x256x64 2x8x128x128x64 2x8x256x256x64 1x8x512x512x64 2x8x512x512x64; do
  bin/sdpabench -kernel stage9 -shapes $shapes -iters 2000 -nocheck 2>&1 | grep -E "device" | sed "s|^|$shapes |"
done | tee $work/small.txt
tar czf $OUT/s17-small.tgz -C $work .
exit $status
