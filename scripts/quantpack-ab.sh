#!/usr/bin/env bash
# quantpack-ab.sh: A/B of quant_pack9 builds on the GPU machine, from the
# repository root, with bin/cuda.test cross-compiled here (gzipped ones are
# unpacked first). GEN=1 first rebuilds the kernels (gen.sh; OUT gets
# kernels.tgz). VARIANTS="name:-DX=1,-DY=2 ..." builds attention_sm90a.cu
# once per variant with those flags (commas for spaces) beside gen.sh's
# cubin ("base"); TESTS (a regexp of bin/cuda.test, default the fused
# path's bit-exactness) runs on every build, SDPA_TESTS (a regexp of
# bin/sdpa-cuda.test) on the base build, and then ROUNDS rounds
# (default 2, the order reversed in every second) of
# BenchmarkDeviceQuantizeAttention (graph replay) on each build, and on
# bin/NAME-cuda.test with its embedded kernels for each NAME in OLD_BINS
# (default old) where there is one. A variant
# named *-stamps (built with -DFP8ATTN_PROFILE) runs TestQuantPackTimeline
# instead of the tests and benchmarks; one named broken-* must fail TESTS
# and is not timed. FULL=1 runs all of bin/cuda.test on the base build, and
# SANITIZE=1 memcheck, racecheck and synccheck on SANITIZE_TESTS (default
# the fused path's bit-exactness).
# Leaves the logs in OUT/quantpack-ab.tgz and prints the fused figures.
set -uo pipefail
name=quantpack-ab
. "$(dirname "$0")/gpu-lib.sh"
unpack_bins
if [ -n "${GEN:-}" ]; then
  if ! build_kernels; then
    tail -30 "$out/gen.log"; failed "kernel build (gen.log)"; exit 1
  fi
fi
use_built_kernels
work=$(mktemp -d)
cp "$kernels_dir/attention_sm_90a.cubin" "$work/base.cubin"
builds=(base)
for v in ${VARIANTS:-}; do
  n=${v%%:*} flags=${v#*:}
  builds+=("$n")
  (cd "$kernels_dir" && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v ${flags//,/ } \
    -o "$work/$n.cubin" attention_sm90a.cu > "$work/$n-build.log" 2>&1) &
done
wait
timed=()
for n in "${builds[@]}"; do
  [ -s "$work/$n.cubin" ] || { failed "build $n ($n-build.log)"; continue; }
  if [[ $n == *-stamps ]]; then
    FP8ATTN_PROFILE=1 FP8ATTN_CUBIN=$work/$n.cubin bin/cuda.test -test.run QuantPackTimeline -test.v -test.timeout 120s \
      > "$work/timeline-$n.txt" 2>&1 || failed "timeline on $n (timeline-$n.txt)"
    grep -E "timeline_test.go:[0-9]+:|^\s{4,}" "$work/timeline-$n.txt" | grep -v seed
    continue
  fi
  if [[ $n == broken-* ]]; then
    if FP8ATTN_CUBIN=$work/$n.cubin bin/cuda.test -test.run "${TESTS:-AttentionQuantizingBitExact}" -test.v -test.timeout 300s \
      > "$work/tests-$n.txt" 2>&1; then
      failed "the broken build $n passed (tests-$n.txt)"
    fi
    echo "$n:"; grep -E "_test.go:[0-9]+: " "$work/tests-$n.txt" | grep -v seed | head -3
    continue
  fi
  timed+=("$n")
  FP8ATTN_CUBIN=$work/$n.cubin bin/cuda.test -test.run "${TESTS:-AttentionQuantizingBitExact}" -test.v -test.timeout 300s \
    > "$work/tests-$n.txt" 2>&1 || failed "tests on $n (tests-$n.txt)"
  echo "tests $n: $(tail -1 "$work/tests-$n.txt")"
done
if [ -n "${SDPA_TESTS:-}" ] && [ -x bin/sdpa-cuda.test ]; then
  FP8ATTN_CUBIN=$work/base.cubin bin/sdpa-cuda.test -test.run "$SDPA_TESTS" -test.v -test.timeout 300s > "$work/sdpa-tests.txt" 2>&1 ||
    failed "sdpa tests (sdpa-tests.txt)"
  echo "sdpa tests: $(tail -1 "$work/sdpa-tests.txt")"
fi
if [ -n "${FULL:-}" ]; then
  FP8ATTN_CUBIN=$work/base.cubin bin/cuda.test -test.timeout 600s > "$work/cuda-tests.txt" 2>&1 || failed "backend tests (cuda-tests.txt)"
  echo "backend tests: $(tail -1 "$work/cuda-tests.txt")"
fi
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck synccheck; do
    FP8ATTN_CUBIN=$work/base.cubin timeout 300 compute-sanitizer --tool $tool --error-exitcode 3 bin/cuda.test \
      -test.run "${SANITIZE_TESTS:-AttentionQuantizingBitExact}" -test.timeout 290s > "$work/$tool.txt" 2>&1 || failed "$tool ($tool.txt)"
    echo "$tool: $(grep -E "SUMMARY" "$work/$tool.txt")"
  done
fi
runs=("${timed[@]}")
for o in ${OLD_BINS:-old}; do [ -x "bin/$o-cuda.test" ] && runs+=("$o"); done
for r in $(seq "${ROUNDS:-2}"); do
  order=("${runs[@]}")
  if [ $((r % 2)) = 0 ]; then order=(); for ((i = ${#runs[@]} - 1; i >= 0; i--)); do order+=("${runs[i]}"); done; fi
  for n in "${order[@]}"; do
    if [ -x "bin/$n-cuda.test" ]; then
      env -u FP8ATTN_CUBIN -u FP8ATTN_PTX -u FP8ATTN_PAGED_PTX -u FP8ATTN_PAGED_CUBIN -u FP8ATTN_PTX80 -u FP8ATTN_PAGED_PTX80 \
        "bin/$n-cuda.test" -test.run '^$' -test.bench DeviceQuantizeAttention -test.benchtime 2000x > "$work/bench-$n-r$r.txt" 2>&1
    else
      FP8ATTN_CUBIN=$work/$n.cubin bin/cuda.test -test.run '^$' -test.bench DeviceQuantizeAttention -test.benchtime 2000x \
        > "$work/bench-$n-r$r.txt" 2>&1
    fi || failed "bench $n round $r"
    echo "round $r $n: $(grep -E '^Benchmark' "$work/bench-$n-r$r.txt" | grep -oE '[0-9.]+ us/(attention|fused)|[0-9.]+ fused-ratio' | tr '\n' ' ')"
  done
done
cp "$out"/*.log "$work"/ 2>/dev/null
tar czf "$out/quantpack-ab.tgz" -C "$work" .
exit $status
