#!/usr/bin/env bash
# Times the Hopper kernel (sdpabench -kernel sm90) beside its peers in one
# run, on the GPU machine, from the repository root, after
# scripts/gpu-run.sh has built the kernels (or with FP8ATTN_CUBIN/FP8ATTN_PTX
# pointing at built ones; sdpabench built with -tags cuda,kerneldev reads
# them): sdpabench (CUDA-graph replay and back-to-back launches) on the
# large-shape table's shapes (docs/BENCHMARKS.md), then
# bench/hopper_peers.py (cuDNN, flash, Triton FP8; graph replay).
# Validates against the float64 oracle where that is affordable on the CPU
# (the mission and long shapes); the conformance suite covers the rest.
# Writes OUT/hopper-bench.tgz (JSON and logs). Environment: KERNELS (names
# sdpabench -kernel takes, default sm90), PEERS=0 (ours only), SDPABENCH (the binary, default bin/sdpabench),
# SHAPES (a subset of the specs below, same syntax).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
export FP8ATTN_PTX=${FP8ATTN_PTX:-$PWD/backend/cuda/kernels/attention_compute_89.ptx}
export FP8ATTN_CUBIN=${FP8ATTN_CUBIN:-$PWD/backend/cuda/kernels/attention_sm_90a.cubin}
status=0
shapes=${SHAPES:-"2x8x256x256x64 1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:causal 4x32x4096x4096x256 2x16x16384x16384x128"}
for spec in $shapes; do
  dims=${spec%%:*}; mask=none; [ "$spec" != "$dims" ] && mask=causal
  check=-nocheck; iters=20
  case $dims in 2x8x256x256x64|1x8x2048x2048x64) check=; iters=2000 ;; esac
  for kernel in ${KERNELS:-sm90}; do
    name=$(echo "$spec" | tr ':' '-')
    ${SDPABENCH:-bin/sdpabench} -kernel $kernel -shapes $dims -mask $mask $check -iters $iters -json "$out/hopper-$kernel-$name.json" \
      > "$out/hopper-$kernel-$name.log" 2>&1 || { echo "FAILED: $kernel $spec"; status=1; }
    grep -E "check|device" "$out/hopper-$kernel-$name.log" | sed "s|^|$kernel $spec: |"
  done
done
if [ "${PEERS:-1}" != 0 ]; then
  python3 bench/hopper_peers.py "$out/hopper-peers.json" $shapes > "$out/hopper-peers.log" 2>&1 || { echo "FAILED: peers"; status=1; }
  grep -v Warning "$out/hopper-peers.log"
fi
# One archive: the device tool brings back few files.
tar czf "$out/hopper-bench.tgz" -C "$out" $(cd "$out" && ls hopper-*.json hopper-*.log 2>/dev/null) && rm -f "$out"/hopper-*.json "$out"/hopper-*.log
exit $status
