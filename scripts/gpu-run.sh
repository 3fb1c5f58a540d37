#!/usr/bin/env bash
# Runs on the GPU machine (nvcc, PyTorch, no Go) from the repository root, with
# bin/cuda.test and bin/sdpabench cross-compiled here with -tags
# cuda,kerneldev (so that they run the kernels built here: gpu-lib.sh,
# use_built_kernels; docs/DEVELOPING.md). Builds the PTX, runs the GPU tests,
# optionally the sanitizers, benchmarks every kernel this GPU runs (the names
# sdpabench -stages prints: the targets sm90, sm89, sm80 and the ladder
# stage1 .. stage8) and PyTorch in one run, and leaves everything under OUT
# (default ./out), stderr included. Exits non-zero if the kernel build, any
# test, any validation or any sanitizer fails; the last lines say which.
# Device-aware: by compute capability it benchmarks sm90 (Hopper) on 9.0
# only and the FP8 mma.sync kernels (sm89, stage7, stage8) on 8.9 and newer;
# on an L4 it is the one command that measures the Ada kernel (sm89) beside
# PyTorch.
#
# Environment: TESTS (test regexp, default all), SKIP (tests to skip),
# SKIP_TESTS=1, SANITIZE=1 (memcheck, racecheck, synccheck on SANITIZE_TESTS,
# each within SANITIZE_TIMEOUT seconds), SKIP_BENCH=1,
# BASELINE=path of an older cuda.test binary (its embedded PTX) to time
# against this build (scripts/ab.py prints the table), ROUNDS rounds
# alternating which goes first (default 2), PACK_ONLY=1 (leave only the two
# archives in OUT),
# NCU=kernel (Nsight Compute on that kernel, e.g. sm90 or stage5, mission
# shape), TORCH=0 (no PyTorch),
# WMMA=1 (rebuild and check the fragment dumps of testdata/wmma: wmma.tgz),
# TEST_TIMEOUT seconds for the test binary (default 1200), DECODE=1 (the paged
# decode benchmark beside bench/decode_peers.py), STAGES (the kernels to
# benchmark, sdpabench -kernel names, default every one this GPU runs),
# SASS=1 (the sm_89 SASS of the Ada kernel, sass89.txt).
set -uo pipefail
name=gpu-run
. "$(dirname "$0")/gpu-lib.sh"
# Everything but the kernels goes into results.tgz; with PACK_ONLY=1 the loose
# files are then removed (the device tool brings back at most 8 files).
pack() {
  tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls *.json *.log *.txt 2>/dev/null)
  [ -n "${PACK_ONLY:-}" ] && find "$out" -maxdepth 1 -type f ! -name '*.tgz' -delete
  return 0
}
use_built_kernels
if ! build_kernels; then
  cat "$out/gen.log"; failed "kernel build (gen.log)"; pack; exit 1
fi
grep -E "QGMMA=" backend/cuda/kernels/resources.txt | grep stage9   # the Hopper kernels' SASS
grep -E "stage10_d[0-9]+(: loop| QMMA)" backend/cuda/kernels/resources.txt  # the Ada kernel's sm_89 SASS
grep -E "[1-9][0-9]* bytes spill" backend/cuda/kernels/resources.txt | head -5  # any spills
if [ -n "${SASS:-}" ]; then
  ptxas -arch=sm_89 -o /tmp/sm89.cubin backend/cuda/kernels/attention_compute_89.ptx &&
    cuobjdump -sass -fun fp8attn_stage10_d64 /tmp/sm89.cubin > "$out/sass89.txt" &&
    cuobjdump -sass -fun fp8attn_stage10_d128 /tmp/sm89.cubin >> "$out/sass89.txt" || failed "SASS"
fi
if [ -n "${WMMA:-}" ]; then
  mkdir -p "$out/wmma"
  testdata/wmma/gen.sh "$out/wmma" > "$out/wmma.log" 2>&1 || failed "fragment dumps (wmma.log)"
  tar czf "$out/wmma.tgz" -C "$out/wmma" . && rm -rf "$out/wmma"
fi
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
# The kernels this GPU runs (the cuda backend refuses the others).
run_stages=""
for st in $(bin/sdpabench -stages); do
  case $st in
    sm90) [ "$cc" = 90 ] || continue ;;
    sm89|stage7|stage8) [ "$cc" -ge 89 ] || continue ;;
  esac
  run_stages="$run_stages $st"
done
[ -n "${STAGES:-}" ] && run_stages=$STAGES  # a subset, for kernel work
echo "kernels on this GPU (sm_$cc):$run_stages"
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout "${TEST_TIMEOUT:-1200}" bin/cuda.test -test.v -test.count=1 -test.timeout "${TEST_TIMEOUT:-1200}s" -test.run "${TESTS:-.}" \
    -test.skip "${SKIP:-^$}" > "$out/test.log" 2>&1 || failed "GPU tests (test.log)"
  grep -E "^(--- FAIL|FAIL|ok|PASS)|checks ran|cuda_test.go.*(FAIL|differ)" "$out/test.log" | head -40
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool $tool --error-exitcode 9 bin/cuda.test -test.count=1 \
      -test.v -test.run "${SANITIZE_TESTS:-TestConcurrentCalls|TestResidentReuse}" > "$out/$tool.log" 2>&1 || failed "$tool ($tool.log)"
    echo "$tool: $(grep -c -- '--- PASS' "$out/$tool.log") tests and subtests passed; $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/$tool.log" | tail -1)"
  done
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  for st in $run_stages; do
    bin/sdpabench -kernel $st -shapes small,mission,long -json "$out/$st.json" > "$out/$st.log" 2>&1 || failed "$st validation or run ($st.log)"
    bin/sdpabench -kernel $st -shapes large -nocheck -iters 50 -json "$out/$st-large.json" >> "$out/$st.log" 2>&1 || failed "$st large ($st.log)"
    grep -E "PASS|FAIL|device" "$out/$st.log"
  done
  if [ "${TORCH:-1}" != 0 ]; then
    python3 bench/torch_sdpa.py "$out/torch.json" > "$out/torch.log" 2>&1 || failed "PyTorch (torch.log)"
    grep -v Warning "$out/torch.log"
  fi
fi
if [ -n "${DECODE:-}" ]; then
  # The paged FP8 decode kernel and its peers, in one run.
  bin/cuda.test -test.run '^$' -test.bench PagedDecode -test.benchtime 200x > "$out/decode.txt" 2>&1 || failed "decode benchmark (decode.txt)"
  grep -E "^Benchmark" "$out/decode.txt"
  python3 bench/decode_peers.py "$out/decode_peers.json" > "$out/decode_peers.log" 2>&1 || failed "decode peers (decode_peers.log)"
  grep -v Warning "$out/decode_peers.log"
fi
if [ -n "${BASELINE:-}" ]; then
  # Same method both sides: BenchmarkStages (CUDA events around batches of
  # back-to-back launches), rounds alternating which binary goes first.
  for r in $(seq 1 "${ROUNDS:-2}"); do
    # Many launches for the microsecond shapes, few for large (stage 1 takes
    # a quarter of a second there).
    bench() {
      "$@" -test.run '^$' -test.bench 'Stages/(small|mission|long)/' -test.benchtime 500x &&
        "$@" -test.run '^$' -test.bench 'Stages/large/' -test.benchtime 30x
    }
    new() { bench bin/cuda.test > "$out/bench-new-r$r.txt" 2>&1 || failed "bench new r$r"; }
    old() { bench env -u FP8ATTN_PTX "$BASELINE" > "$out/bench-old-r$r.txt" 2>&1 || failed "bench old r$r"; }
    if [ $((r % 2)) = 1 ]; then new; old; else old; new; fi
  done
  python3 scripts/ab.py "$out" | tee "$out/ab.txt"
fi
if [ -n "${NCU:-}" ]; then
  # The kernels' entry points keep their stage numbers (fp8attn_stage9_d64).
  case $NCU in sm90) entry=stage9 ;; sm89) entry=stage10 ;; sm80) entry="stage[56]" ;; *) entry=$NCU ;; esac
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats -k "regex:${entry}_d64" -c 1 \
    bin/sdpabench -kernel $NCU -shapes mission -nocheck -iters 5 > "$out/ncu.txt" 2>&1 || failed "ncu (ncu.txt)"
  grep -E "Duration|Throughput|Achieved|Warp Cycles Per Issued" "$out/ncu.txt"
fi
[ -s "$out/failures.txt" ] && cat "$out/failures.txt"
pack
echo "gpu-run: exit $status"
exit $status
