#!/usr/bin/env bash
# The GPU prefill table of docs/BENCHMARKS.md in one run, on the GPU machine
# (nvcc, PyTorch, Triton, no Go), from the repository root:
#
#   bash scripts/gpu-prefill-peers.sh [PEERS_DIR]
#
# ours     bin/sdpabench (cross-compiled here: go build -tags cuda -o
#          bin/sdpabench ./cmd/sdpabench): the public call, Device.Attention
#          on FP8 device tensors and on float32 device tensors with FP8
#          precision, captured and replayed (sdpabench's public mode);
#          validated against the float64 oracle on the two small shapes;
# cuDNN    the cuDNN FP8 peer (PEERS_DIR/cudnn_fp8, default .dev/peers: a
#          git-ignored copy of the peers, not part of the project), built here
#          with its build_and_run.sh while the PyTorch phase runs (no GPU for
#          the build: CUDA_VISIBLE_DEVICES=-1), then run on BHSD, on BSHD, and
#          --accuracy; its output is E4M3;
# PyTorch  bench/hopper_peers.py: SDPA fp16 on cuDNN, and Triton FP8;
#          bench/peer_accuracy.py --cudnn-cases;
# and      sdpabench -accuracy; bench/prefill_table.py merges everything into
#          OUT/prefill-peers.md (printed), with device, date and commit.
# Ours runs first, alone on the machine (its replays are host-timed); the
# peers time on the device (CUDA events).
#
# Each phase prints its wall time. Everything else goes into
# OUT/prefill-peers.tgz. Exits non-zero if a phase failed (OUT/failures.txt
# says which; the table shows n/a where a column is missing).
# Environment: OUT (default ./out), PEERS_DIR (or the first argument),
# BUDGET_S (default 570: each phase's time limit is cut to end by then),
# SDPABENCH (default bin/sdpabench), SDPABENCH_FLAGS (more flags for its timed
# runs, e.g. -graph-calls 1), PYTHON (default python3), COMMIT (the commit the
# binary was built from; default: the revision Go recorded in it, if it did,
# else git's, else "unknown"), SHAPES (a subset of the table, same spelling), BUILD_KERNELS=1 (build the kernels here with gen.sh and run them:
# the binary must then be built with -tags cuda,kerneldev; gpu-lib.sh).
set -uo pipefail
name=gpu-prefill-peers
. "$(dirname "$0")/gpu-lib.sh"
peers_dir=$(cd "${1:-${PEERS_DIR:-.dev/peers}}" 2>/dev/null && pwd) || peers_dir=""
sdpabench=${SDPABENCH:-bin/sdpabench}
py=${PYTHON:-python3}
work=$(mktemp -d)
run=$work/run # what the merge reads
mkdir -p "$run"
# sdpatest.PrefillShapes, in its order (TestScriptShapes holds the two equal).
shapes=${SHAPES:-"2x8x256x256x64 1x8x2048x2048x64 4x32x4096x4096x64 4x32x4096x4096x96 4x32x4096x4096x128 4x32x4096x4096x128:bshd 4x32x8x4096x4096x128 4x32x4096x4096x128:causal 4x32x4096x4096x256 2x16x16384x16384x128"}

t_all=$SECONDS
t_phase=$SECONDS
# lim N: N seconds, or fewer so that the run ends within BUDGET_S (default
# 570: the device tool's limit a command is 600 s).
lim() {
  local l=$((${BUDGET_S:-570} - (SECONDS - t_all) - 15))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 5 ] && l=5
  echo "$l"
}
phase() { # phase NAME: ends the phase before, starts NAME
  [ -n "${cur:-}" ] && echo "== $cur: $((SECONDS - t_phase)) s" | tee -a "$run/phases.txt"
  cur=$1
  t_phase=$SECONDS
  [ -n "$cur" ] && echo "== $cur"
}

unpack_bins
if [ -n "${BUILD_KERNELS:-}" ]; then
  phase "kernels (gen.sh)"
  use_built_kernels
  build_kernels || failed "kernel build (gen.log)"
fi
commit=${COMMIT:-$(grep -ao 'vcs.revision=[0-9a-f]*' "$sdpabench" 2>/dev/null | head -1 | cut -d= -f2)}
[ -z "$commit" ] || [ -n "${COMMIT:-}" ] || ! grep -aq 'vcs.modified=true' "$sdpabench" || commit="$commit (+ uncommitted changes)"
commit=${commit:-$(git rev-parse --short HEAD 2>/dev/null)}
gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)
{
  echo "device: $(echo "$gpu" | cut -d, -f1)"
  echo "date: $(date -u +%Y-%m-%d)"
  echo "commit: ${commit:-unknown}"
  echo "command: bash scripts/gpu-prefill-peers.sh ${1:-${PEERS_DIR:-.dev/peers}} (bin/sdpabench: go build -tags cuda -o bin/sdpabench ./cmd/sdpabench)"
  echo "gpu: $gpu"
} > "$run/meta.txt"
cat "$run/meta.txt"

# Ours first, on a machine with nothing else running (host-timed replays).
small="" large=""
for s in $shapes; do
  case $s in 2x8x256x256x64 | 1x8x2048x2048x64) small="$small,$s" ;; *) large="$large,$s" ;; esac
done
if [ -n "$small" ]; then
  phase "ours: sdpabench, small shapes, validated"
  timeout $(lim 200) "$sdpabench" -backend cuda ${SDPABENCH_FLAGS:-} -shapes "${small#,}" -json "$run/ours-small.json" > "$run/ours-small.log" 2>&1 || failed "sdpabench small (ours-small.log)"
  grep -E "check|time|seed" "$run/ours-small.log"
fi
if [ -n "$large" ]; then
  phase "ours: sdpabench, large shapes"
  timeout $(lim 300) "$sdpabench" -backend cuda ${SDPABENCH_FLAGS:-} -nocheck -shapes "${large#,}" -json "$run/ours-large.json" > "$run/ours-large.log" 2>&1 || failed "sdpabench large (ours-large.log)"
  grep -E "time|seed" "$run/ours-large.log"
fi
phase "ours: sdpabench -accuracy"
timeout $(lim 120) "$sdpabench" -backend cuda -accuracy > "$run/acc-ours.log" 2>&1 || failed "sdpabench -accuracy (acc-ours.log)"
grep -E "ACCURACY|seed" "$run/acc-ours.log"
# The cuDNN peer's build, in the background, without the GPU.
cudnn_dir=${peers_dir:+$peers_dir/cudnn_fp8}
build_pid=""
if [ -n "$cudnn_dir" ] && [ -f "$cudnn_dir/build_and_run.sh" ]; then
  echo "== cuDNN FP8 peer: building in the background ($cudnn_dir)"
  (CUDA_VISIBLE_DEVICES=-1 OUT=$work/cudnn-build BUILD_DIR=$work/cudnn-bin BENCH_TIME_LIMIT_S=280 \
    bash "$cudnn_dir/build_and_run.sh" --no-validate --no-graph 2x8x256x256x64 > "$run/cudnn-build.log" 2>&1) &
  build_pid=$!
else
  failed "no cuDNN FP8 peer at '${1:-${PEERS_DIR:-.dev/peers}}'/cudnn_fp8 (copy /work/shared/peers there)"
fi

phase "PyTorch cuDNN fp16 and Triton FP8 (bench/hopper_peers.py)"
(cd bench && timeout $(lim 300) "$py" hopper_peers.py "$run/peers.json" --peers=torch-cudnn,triton-fp8 $shapes) \
  > "$run/peers.log" 2>&1 || failed "hopper_peers.py (peers.log)"
grep -v Warning "$run/peers.log" | grep -E "TFLOP|unavailable|validation|torch" | head -40
phase "Triton FP8 and cuDNN fp16 accuracy (bench/peer_accuracy.py --cudnn-cases)"
(cd bench && timeout $(lim 120) "$py" peer_accuracy.py --cudnn-cases) > "$run/acc-peers.log" 2>&1 || failed "peer_accuracy.py (acc-peers.log)"
grep ACCURACY "$run/acc-peers.log"

if [ -n "$build_pid" ]; then
  phase "cuDNN FP8 peer: waiting for its build"
  wait "$build_pid"
  bin=$work/cudnn-bin/cudnn_fp8_bench
  ldp=$(sed -n 's/^run-time LD_LIBRARY_PATH=//p' "$run/cudnn-build.log" | head -1)
  grep -E "^(cuDNN|nvcc|built|BUILD|FATAL)" "$run/cudnn-build.log" | head -8
  if [ -x "$bin" ]; then
    # Its shapes: no grouped heads (the peer has one head count); BSHD in a run of its own.
    bhsd="" bshd=""
    for s in $shapes; do
      dims=${s%%:*}
      [ "$(awk -Fx '{print NF}' <<< "$dims")" = 5 ] || continue
      case $s in *:bshd*) bshd="$bshd ${s/:bshd/}" ;; *) bhsd="$bhsd $s" ;; esac
    done
    phase "cuDNN FP8 (E4M3 output), BHSD"
    LD_LIBRARY_PATH=$ldp timeout $(lim 200) "$bin" --time-budget-s=150 $bhsd > "$run/cudnn-bhsd.log" 2>&1 || failed "cuDNN FP8 BHSD (cudnn-bhsd.log)"
    grep -E "^(RESULT|UNSUPPORTED|FAILED|VALIDATION|device|cudnn:)" "$run/cudnn-bhsd.log"
    if [ -n "$bshd" ]; then
      phase "cuDNN FP8 (E4M3 output), BSHD"
      LD_LIBRARY_PATH=$ldp timeout $(lim 100) "$bin" --layout=bshd --no-validate --time-budget-s=60 $bshd > "$run/cudnn-bshd.log" 2>&1 ||
        failed "cuDNN FP8 BSHD (cudnn-bshd.log)"
      grep -E "^(RESULT|UNSUPPORTED|FAILED)" "$run/cudnn-bshd.log"
    fi
    phase "cuDNN FP8 accuracy (--accuracy)"
    LD_LIBRARY_PATH=$ldp timeout $(lim 120) "$bin" --accuracy --time-budget-s=90 > "$run/acc-cudnn.log" 2>&1 || failed "cuDNN FP8 accuracy (acc-cudnn.log)"
    grep -E "^(ACCURACY|UNSUPPORTED|FAILED)" "$run/acc-cudnn.log" | cut -c1-160
    grep -m1 '^cudnn:' "$run/cudnn-bhsd.log" >> "$run/meta.txt"
  else
    failed "cuDNN FP8 peer build (cudnn-build.log)"
    cp "$work"/cudnn-build/build_*.log "$run/" 2>/dev/null
    tail -20 "$run/cudnn-build.log"
  fi
fi

echo "torch: $(grep -m1 '^torch' "$run/peers.log")" >> "$run/meta.txt"

phase "merge"
"$py" bench/prefill_table.py "$run" $shapes > "$out/prefill-peers.md" 2> "$run/merge.log" || failed "merge (merge.log)"
phase ""
echo "total: $((SECONDS - t_all)) s" | tee -a "$run/phases.txt"
echo
cat "$out/prefill-peers.md"
[ -s "$out/failures.txt" ] && cp "$out/failures.txt" "$run/" && cat "$out/failures.txt"
tar czf "$out/prefill-peers.tgz" -C "$work" run
rm -rf "$work"
echo "$name: exit $status"
exit $status
