#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with test binaries
# cross-compiled here (go test -c -tags cuda; gzipped ones are unpacked
# first): the graph tests and the device-tensor and cache tests of sdpa
# (bin/sdpa-cuda.test), the backend's suite (bin/cuda.test), deliberately
# broken builds of either that must fail the tests BROKEN_RUN names
# (bin/broken-NAME.test, each logged to broken-NAME.txt), the sanitizers on
# the graph and append tests (SANITIZE=1), and BenchmarkGraphGPU,
# BenchmarkKVCacheDecodeGPU and BenchmarkKVCacheAppendGPU (ROUNDS rounds,
# default 3, alternating with bin/old-sdpa-cuda.test where there is one;
# SKIP_BENCH=1 skips); CUDA_BENCH, a benchmark regexp of bin/cuda.test
# run in the same rounds. GEN=1 first rebuilds the kernels (gen.sh; OUT gets
# kernels.tgz) and points every binary at them. SANITIZE_CUDA is the
# backend tests the sanitizers run (default PagedAppendBitExact). PACK=1
# leaves the logs in OUT/logs.tgz (the device tool brings back 8 files).
# Leaves logs under OUT (default ./out); exits non-zero if anything that must
# pass fails.
set -uo pipefail
name=gpu-graphs
. "$(dirname "$0")/gpu-lib.sh"
unpack_bins
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
if [ -n "${GEN:-}" ]; then
  if ! build_kernels; then
    tail -20 "$out/gen.log"; failed "kernel build (gen.log)"; exit 1
  fi
  use_built_kernels
fi
bin/sdpa-cuda.test -test.run 'Graph|Capture|DeviceGPU|KVCache|Device' -test.v -test.timeout 600s > "$out/sdpa-tests.txt" 2>&1 || failed "sdpa tests (sdpa-tests.txt)"
tail -3 "$out/sdpa-tests.txt"
for bad in bin/broken-*.test; do
  [ -x "$bad" ] || continue
  variant=${bad#bin/broken-}; variant=${variant%.test}
  if "$bad" -test.run "${BROKEN_RUN:-Graph|PagedAppendBitExact}" -test.v -test.timeout 300s > "$out/broken-$variant.txt" 2>&1; then
    failed "the broken build $variant passed (broken-$variant.txt)"
  fi
  echo "broken-$variant:"; grep -E "_test.go:[0-9]+: " "$out/broken-$variant.txt" | grep -v seed | head -3
done
if [ -x bin/cuda.test ]; then
  bin/cuda.test -test.timeout 600s > "$out/cuda-tests.txt" 2>&1 || failed "backend tests (cuda-tests.txt)"
  tail -2 "$out/cuda-tests.txt"
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 bin/sdpa-cuda.test -test.run 'Graph|Capture' -test.timeout 190s > "$out/$tool.txt" 2>&1 || failed "$tool ($tool.txt)"
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run "${SANITIZE_CUDA:-PagedAppendBitExact}" -test.timeout 190s >> "$out/$tool.txt" 2>&1 || failed "$tool on the appends ($tool.txt)"
    grep -E "SUMMARY" "$out/$tool.txt"
  done
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  bench='GraphGPU|KVCacheDecodeGPU|KVCacheAppendGPU'
  for r in $(seq "${ROUNDS:-3}"); do
    if [ -x bin/old-sdpa-cuda.test ]; then
      echo "# round $r" >> "$out/bench-old.txt"
      bin/old-sdpa-cuda.test -test.run '^$' -test.bench "$bench" -test.benchtime 1000x >> "$out/bench-old.txt" 2>&1 || failed "old benchmarks (bench-old.txt)"
    fi
    echo "# round $r" >> "$out/bench.txt"
    bin/sdpa-cuda.test -test.run '^$' -test.bench "$bench" -test.benchtime 1000x >> "$out/bench.txt" 2>&1 || failed "benchmarks (bench.txt)"
    if [ -n "${CUDA_BENCH:-}" ]; then
      echo "# round $r" >> "$out/bench-cuda.txt"
      bin/cuda.test -test.run '^$' -test.bench "$CUDA_BENCH" >> "$out/bench-cuda.txt" 2>&1 || failed "backend benchmarks (bench-cuda.txt)"
    fi
  done
  [ -f "$out/bench-cuda.txt" ] && grep -E "ratio" "$out/bench-cuda.txt"
  grep -E "us/(step|call)" "$out/bench.txt"
  [ -f "$out/bench-old.txt" ] && { echo "# old"; grep -E "us/(step|call)" "$out/bench-old.txt"; }
fi
if [ -n "${PACK:-}" ]; then
  (cd "$out" && tar czf logs.tgz $(ls *.txt *.log 2>/dev/null) && rm -f *.txt *.log)
fi
exit $status
