#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with bin/cuda.test
# cross-compiled here (gzipped is fine): the paged-cache (decode) checks
# and timings in one call. GEN=1 first rebuilds the kernels (gen.sh; OUT gets
# kernels.tgz) and points the binary at them. Then the backend tests TESTS
# names (default Paged), deliberately broken builds that must fail theirs:
# bin/broken-NAME.test of backend/cuda (broken-NAME.txt) and
# bin/sdpa-broken-NAME.test of sdpa (sdpa-broken-NAME.txt), each on the
# pattern in bin/[sdpa-]broken-NAME.run where build-gpu-mutants wrote one
# (BROKEN_GO_RUN, BROKEN_SDPA_RUN override), with GEN the paged mutants of
# backend/cuda/kernels/mutants (mutant-NAME.log; SKIP_BROKEN=1 skips them), SDPA=1 the sdpa device,
# graph and cache tests (bin/sdpa-cuda.test), the sanitizers on SANITIZE_TESTS
# (SANITIZE=1), and ROUNDS rounds (default 2) of BenchmarkPagedDecode each
# followed by bench/decode_peers.py (PyTorch on an fp16 cache, the same
# graph-replay timer) in the same run (SKIP_BENCH=1 skips; EXTRA_BENCH, a
# benchmark regexp run once after). NCU=1 profiles the decode kernels on
# the B8 shape (ncu.txt, ncu-source.csv). STAMPS=1 builds the profile ws
# kernel (-DFP8ATTN_PROFILE) and logs TestWSTimeline with PDL on and off
# (timeline.txt; bin/cuda.test built with -tags cuda,kerneldev, as for
# GEN). Logs go to OUT/logs.tgz; exits non-zero if anything that must pass
# fails.
set -uo pipefail
name=gpu-decode
. "$(dirname "$0")/gpu-lib.sh"
unpack_bins
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/device.txt"
if [ -n "${GEN:-}" ]; then
  if ! build_kernels; then
    tail -30 "$out/gen.log"; failed "kernel build (gen.log)"
    (cd "$out" && tar czf logs.tgz *.txt *.log && rm -f *.txt *.log); exit 1
  fi
  use_built_kernels
  grep -A12 "paged_sm_90a.cubin" backend/cuda/kernels/resources.txt | grep -E "ws_d|Used|spill" | paste - - - | sed 's/  */ /g'
fi
timeout 600 bin/cuda.test -test.run "${TESTS:-Paged}" -test.v -test.timeout 580s > "$out/tests.txt" 2>&1 || failed "tests (tests.txt)"
grep -E "^(--- FAIL|FAIL|ok|PASS)" "$out/tests.txt" | head -20
# Broken kernels: the paged mutants (backend/cuda/kernels/mutants/paged-*.sed)
# must fail their tests (scripts/gpu-mutants.sh, with bin/cuda-kerneldev.test).
if [ -n "${GEN:-}" ] && [ -z "${SKIP_BROKEN:-}" ]; then
  MUTANTS='^paged-' bash scripts/gpu-mutants.sh || failed "a paged mutant passed its tests or did not build (gpu-mutants)"
fi
sdpa_run='Graph|Capture|DeviceGPU|KVCache|Device'
if [ -n "${SDPA:-}" ] && [ -x bin/sdpa-cuda.test ]; then
  timeout 400 bin/sdpa-cuda.test -test.run "$sdpa_run" -test.v -test.timeout 390s > "$out/sdpa-tests.txt" 2>&1 || failed "sdpa tests (sdpa-tests.txt)"
  grep -E "^(--- FAIL|FAIL|ok|PASS)" "$out/sdpa-tests.txt" | head -5
fi
# Broken Go builds (go run ./internal/mutant/cmd/build-gpu-mutants, docs/DEVELOPING.md).
for bad in bin/broken-*.test bin/sdpa-broken-*.test; do
  [ -x "$bad" ] || continue
  variant=${bad#bin/}; variant=${variant%.test}
  case $variant in
    sdpa-*) run=${BROKEN_SDPA_RUN:-}; dflt=$sdpa_run ;;
    *) run=${BROKEN_GO_RUN:-}; dflt=Paged ;;
  esac
  [ -z "$run" ] && [ -f "bin/$variant.run" ] && run=$(cat "bin/$variant.run")
  if timeout 300 "$bad" -test.run "${run:-$dflt}" -test.v -test.timeout 280s > "$out/$variant.txt" 2>&1; then
    failed "the broken build $variant passed (${run:-$dflt}; $variant.txt)"
  fi
  echo "$variant:"; grep -E "_test.go:[0-9]+: " "$out/$variant.txt" | grep -v seed | head -3
done
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    timeout 280 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test -test.run "${SANITIZE_TESTS:-PagedAgainstCPU}" -test.timeout 270s > "$out/$tool.txt" 2>&1 || failed "$tool ($tool.txt)"
    grep -E "SUMMARY" "$out/$tool.txt"
  done
fi
if [ -n "${STAMPS:-}" ]; then
  require_kerneldev
  (cd $kernels_dir && nvcc -O3 -std=c++17 -DFP8ATTN_PROFILE -gencode=arch=compute_90a,code=sm_90a -cubin -o /tmp/stamps.cubin paged.cu) > "$out/stamps-build.log" 2>&1 || failed "stamps build (stamps-build.log)"
  for pdl in 1 0 1 0; do
    echo "# FP8ATTN_PDL=$pdl" >> "$out/timeline.txt"
    FP8ATTN_PDL=$pdl FP8ATTN_PROFILE=1 FP8ATTN_PAGED_CUBIN=/tmp/stamps.cubin timeout 200 bin/cuda.test -test.run WSTimeline -test.v >> "$out/timeline.txt" 2>&1 || failed "timeline (timeline.txt)"
  done
  grep -vE "^(=== RUN|PASS|ok)" "$out/timeline.txt" | sed 's/^ *paged_test.go:[0-9]*: //' | head -80
fi
if [ -n "${NCU:-}" ]; then
  timeout 300 ncu --set full --import-source no --clock-control none -k 'regex:fp8attn_paged_(ws_)?d128' -c 1 -o /tmp/decode-ncu \
    bin/cuda.test -test.run '^$' -test.bench 'PagedDecode$/B8.*/paged$' -test.benchtime 1x > "$out/ncu-run.txt" 2>&1 || failed "ncu (ncu-run.txt)"
  ncu -i /tmp/decode-ncu.ncu-rep --page details > "$out/ncu.txt" 2>&1
  ncu -i /tmp/decode-ncu.ncu-rep --page source --csv --print-source sass > "$out/ncu-source.csv" 2>&1
  grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|DRAM Throughput|Registers Per" "$out/ncu.txt" | head -8
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  for r in $(seq "${ROUNDS:-2}"); do
    echo "# round $r" | tee -a "$out/decode.txt" >> "$out/decode_peers.log"
    bin/cuda.test -test.run '^$' -test.bench 'PagedDecode$' -test.benchtime 200x >> "$out/decode.txt" 2>&1 || failed "decode benchmark (decode.txt)"
    python3 bench/decode_peers.py "$out/decode_peers-$r.json" >> "$out/decode_peers.log" 2>&1 || failed "decode peers (decode_peers.log)"
  done
  grep -E "^(# round|Benchmark)" "$out/decode.txt" | sed 's/  */ /g'
  grep -vi warning "$out/decode_peers.log" | grep -E "round|cudnn|flash" 
  if [ -n "${EXTRA_BENCH:-}" ]; then
    bin/cuda.test -test.run '^$' -test.bench "$EXTRA_BENCH" > "$out/extra-bench.txt" 2>&1 || failed "benchmarks (extra-bench.txt)"
    grep -E "^Benchmark" "$out/extra-bench.txt" | sed 's/  */ /g'
  fi
fi
(cd "$out" && tar czf logs.tgz $(ls *.txt *.log *.json *.csv 2>/dev/null) && rm -f *.txt *.log *.json *.csv)
exit $status
