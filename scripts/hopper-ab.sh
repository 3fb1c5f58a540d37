#!/usr/bin/env bash
# A/B of Hopper-kernel builds in one run, on the GPU machine, from the
# repository root: scripts/hopper-ab.sh NAME=CUBIN[@SDPABENCH] ... times
# the Hopper kernel (sm90) from each cubin (with its own sdpabench binary
# where one is named, for a cubin of another tile geometry; every sdpabench
# built with -tags cuda,kerneldev, which reads FP8ATTN_CUBIN) on the
# large-shape table's shapes (scripts/hopper-bench.sh,
# PEERS=0: graph replay, the mission and long shapes validated), ROUNDS
# rounds (default 2) alternating the order, then prints per shape and build
# the median over rounds of the per-call p50 (scripts/hopper_ab.py) and
# writes OUT/hopper-ab.tgz (every round's JSON and logs, and the table).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
work=$(mktemp -d)
status=0
variants=("$@")
for r in $(seq 1 "${ROUNDS:-2}"); do
  order=("${variants[@]}")
  if [ $((r % 2)) = 0 ]; then order=(); for ((i = ${#variants[@]} - 1; i >= 0; i--)); do order+=("${variants[i]}"); done; fi
  for v in "${order[@]}"; do
    name=${v%%=*} spec=${v#*=}
    cubin=${spec%%@*} bench=bin/sdpabench
    [ "$cubin" != "$spec" ] && bench=${spec#*@}
    # Only a kerneldev build reads FP8ATTN_CUBIN (gpu-lib.sh, require_kerneldev).
    grep -aq overrides_kerneldev.go "$bench" || { echo "FAILED: $bench was built without -tags kerneldev"; status=1; continue; }
    dir="$work/$name-r$r"
    mkdir -p "$dir"
    echo "== round $r: $name ($cubin, $bench)"
    OUT=$dir PEERS=0 FP8ATTN_CUBIN=$cubin SDPABENCH=$bench bash scripts/hopper-bench.sh || { echo "FAILED: $name round $r"; status=1; }
    tar xzf "$dir/hopper-bench.tgz" -C "$dir" && rm -f "$dir/hopper-bench.tgz"
  done
done
python3 scripts/hopper_ab.py "$work" | tee "$work/ab.txt"
tar czf "$out/hopper-ab.tgz" -C "$work" .
exit $status
