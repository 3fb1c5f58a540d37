#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with test binaries
# cross-compiled here (go test -c -tags cuda; gzipped ones are unpacked
# first): the graph tests and the device-tensor and cache tests of sdpa
# (bin/sdpa-cuda.test), the backend's suite (bin/cuda.test), deliberately
# broken builds that must fail their graph tests
# (bin/sdpa-cuda-broken-NAME.test, each logged to broken-NAME.txt), the
# sanitizers on the graph tests (SANITIZE=1), and BenchmarkGraphGPU beside
# BenchmarkKVCacheDecodeGPU (ROUNDS rounds, default 3; SKIP_BENCH=1 skips).
# Leaves logs under OUT (default ./out); exits non-zero if anything that must
# pass fails.
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
status=0
for z in bin/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done
chmod +x bin/* 2>/dev/null
failed() { echo "gpu-graphs: FAILED: $*" | tee -a "$out/failures.txt"; status=1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
bin/sdpa-cuda.test -test.run 'Graph|Capture|DeviceGPU|KVCache|Device' -test.v -test.timeout 600s > "$out/sdpa-tests.txt" 2>&1 || failed "sdpa tests (sdpa-tests.txt)"
tail -3 "$out/sdpa-tests.txt"
for bad in bin/sdpa-cuda-broken-*.test; do
  [ -x "$bad" ] || continue
  name=${bad#bin/sdpa-cuda-broken-}; name=${name%.test}
  if "$bad" -test.run 'Graph' -test.v -test.timeout 300s > "$out/broken-$name.txt" 2>&1; then
    failed "the broken build $name passed (broken-$name.txt)"
  fi
  echo "broken-$name:"; grep -E "graph_test.go:[0-9]+: " "$out/broken-$name.txt" | grep -v seed | head -3
done
if [ -x bin/cuda.test ]; then
  bin/cuda.test -test.timeout 600s > "$out/cuda-tests.txt" 2>&1 || failed "backend tests (cuda-tests.txt)"
  tail -2 "$out/cuda-tests.txt"
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 3 bin/sdpa-cuda.test -test.run 'Graph|Capture' -test.timeout 280s > "$out/$tool.txt" 2>&1 || failed "$tool ($tool.txt)"
    tail -1 "$out/$tool.txt"
  done
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  for r in $(seq "${ROUNDS:-3}"); do
    bin/sdpa-cuda.test -test.run '^$' -test.bench 'GraphGPU|KVCacheDecodeGPU' -test.benchtime 3000x >> "$out/bench.txt" 2>&1 || failed "benchmarks (bench.txt)"
  done
  grep -E "us/step" "$out/bench.txt"
fi
exit $status
