#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with bin/cuda.test,
# bin/sdpa-cuda.test and bin/sdpabench cross-compiled here (gzipped is
# fine): programmatic dependent launch (kernels/pdl.cuh) validated, then
# timed on and off in one run.
#   GEN=1      rebuild the kernels first (gen.sh; OUT gets kernels.tgz) and
#              point the binaries at them.
#   TESTS      the backend tests to run with PDL on (default: all of them),
#              then the sdpa device, graph and cache tests.
#   BROKEN=1   the mutant mutants/pdl-no-wait.sed (no griddepcontrol.wait: a
#              kernel may read what the one before it has not written yet)
#              must fail its tests (scripts/gpu-mutants.sh).
#   SANITIZE=1 memcheck, racecheck and synccheck on SANITIZE_TESTS.
#   ROUNDS     rounds (default 2) of: with FP8ATTN_PDL=1 then =0 (the order
#              reversed every other round), the mission-shape sm90 call
#              (sdpabench, graph replay), BenchmarkPagedDecode,
#              BenchmarkDeviceQuantizeAttention and the sdpa API's
#              BenchmarkGraphGPU (host time per step); then, PEERS=1 (default),
#              bench/decode_peers.py and bench/hopper_peers.py on the mission
#              shape. 0 skips the benchmarks.
# Logs go to OUT/logs.tgz; exits non-zero if anything that must pass fails.
set -uo pipefail
name=gpu-pdl
. "$(dirname "$0")/gpu-lib.sh"
out=$(cd "$out" && pwd)
unpack_bins
require_kerneldev # FP8ATTN_PDL=0 acts only in kerneldev builds
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/device.txt"
if [ -n "${GEN:-}" ]; then
  if ! build_kernels; then
    tail -30 "$out/gen.log"; failed "kernel build (gen.log)"
    (cd "$out" && tar czf logs.tgz *.txt *.log); exit 1
  fi
  use_built_kernels
  grep -E "griddepcontrol|spill" "$out/gen.log" | head -5
fi
k=$kernels_dir
timeout 420 bin/cuda.test -test.run "${TESTS:-.}" -test.v -test.timeout 410s > "$out/tests.txt" 2>&1 || failed "tests (tests.txt)"
grep -E "^(--- FAIL|FAIL|ok|PASS)" "$out/tests.txt" | head -20
if [ -x bin/sdpa-cuda.test ]; then
  timeout 300 bin/sdpa-cuda.test -test.run 'Graph|Capture|DeviceGPU|KVCache|Device' -test.v -test.timeout 290s > "$out/sdpa-tests.txt" 2>&1 || failed "sdpa tests (sdpa-tests.txt)"
  grep -E "^(--- FAIL|FAIL|ok|PASS)" "$out/sdpa-tests.txt" | head -5
fi
if [ -n "${BROKEN:-}" ]; then  # the mutant without griddepcontrol.wait must fail its tests
  MUTANTS='^pdl-no-wait$' bash scripts/gpu-mutants.sh || failed "the build without griddepcontrol.wait passed or did not build (gpu-mutants)"
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 280 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run "${SANITIZE_TESTS:-PagedAgainstCPU|AttentionQuantizingBitExact}" -test.timeout 270s > "$out/$tool.txt" 2>&1 || failed "$tool ($tool.txt)"
    grep -E "SUMMARY" "$out/$tool.txt"
  done
fi
for r in $(seq "${ROUNDS:-2}"); do
  order="1 0"; [ $((r % 2)) = 0 ] && order="0 1"
  for pdl in $order; do
    echo "# round $r FP8ATTN_PDL=$pdl" | tee -a "$out/mission.txt" "$out/decode.txt" >> "$out/quant.txt"
    FP8ATTN_PDL=$pdl bin/sdpabench -kernel sm90 -shapes 2x8x256x256x64 -iters 2000 >> "$out/mission.txt" 2>&1 || failed "sdpabench (mission.txt)"
    FP8ATTN_PDL=$pdl bin/cuda.test -test.run '^$' -test.bench 'PagedDecode$' -test.benchtime 200x >> "$out/decode.txt" 2>&1 || failed "decode benchmark (decode.txt)"
    FP8ATTN_PDL=$pdl bin/cuda.test -test.run '^$' -test.bench 'DeviceQuantizeAttention' >> "$out/quant.txt" 2>&1 || failed "quantize benchmark (quant.txt)"
    if [ -x bin/sdpa-cuda.test ]; then
      FP8ATTN_PDL=$pdl bin/sdpa-cuda.test -test.run '^$' -test.bench 'GraphGPU' -test.benchtime 3000x >> "$out/quant.txt" 2>&1 || failed "graph benchmark (quant.txt)"
    fi
  done
  if [ "${PEERS:-1}" != 0 ]; then
    echo "# round $r" >> "$out/peers.log"
    python3 bench/decode_peers.py "$out/decode_peers-$r.json" >> "$out/peers.log" 2>&1 || failed "decode peers (peers.log)"
    python3 bench/hopper_peers.py "$out/hopper_peers-$r.json" 2x8x256x256x64 >> "$out/peers.log" 2>&1 || failed "hopper peers (peers.log)"
  fi
done
if [ "${ROUNDS:-2}" != 0 ]; then
  grep -E "^# round|device|graph" "$out/mission.txt" | sed 's/  */ /g'
  grep -E "^(# round|Benchmark)" "$out/decode.txt" "$out/quant.txt" | sed 's/  */ /g'
  grep -vi warning "$out/peers.log" 2>/dev/null | grep -E "round|cudnn|flash|triton" | head -40
fi
(cd "$out" && tar czf logs.tgz $(ls *.txt *.log *.json 2>/dev/null) && rm -f *.txt *.log *.json)
exit $status
