#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with bin/cuda.test
# cross-compiled here: A/B of paged.cu variants in one run. VARIANTS is
# "name:flags;name:flags;..." (nvcc -D flags for the sm_90a build of
# paged.cu; flags EMBEDDED means the binary's own kernels, unbuilt). Each
# is built (build-NAME.log, the ptxas report), with TEST_VARIANTS=1 tested
# (TESTS, default the paged conformance and CPU comparison; test-NAME.txt),
# then ROUNDS rounds (default 1) run BENCH (default
# BenchmarkPagedDecodeWSSplits) on every variant in turn (bench.txt). Logs
# go to OUT/logs.tgz.
set -uo pipefail
name=gpu-paged-variants
. scripts/gpu-lib.sh
out=$(cd "$out" && pwd)
unpack_bins
require_kerneldev # FP8ATTN_PAGED_CUBIN acts only in kerneldev builds
k=$kernels_dir
IFS=';' read -ra vs <<< "${VARIANTS}"
for v in "${vs[@]}"; do
  n=${v%%:*}; f=${v#*:}
  [ "$f" = EMBEDDED ] && continue
  (cd $k && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v $f -o /tmp/v-$n.cubin paged.cu > $out/build-$n.log 2>&1) &
done
wait
cub() { [ "${1#*:}" = EMBEDDED ] && echo "" || echo "/tmp/v-${1%%:*}.cubin"; }
for v in "${vs[@]}"; do n=${v%%:*}; [ "${v#*:}" = EMBEDDED ] && continue
  [ -s /tmp/v-$n.cubin ] || { failed "build $n"; grep -E "error|warning" $out/build-$n.log | head -20; }
  grep -A2 "ws_d128'" $out/build-$n.log | tail -2; done
[ $status = 0 ] || { (cd "$out" && tar czf logs.tgz *.log); exit 1; }
if [ -n "${TEST_VARIANTS:-}" ]; then
  for v in "${vs[@]}"; do n=${v%%:*}
    FP8ATTN_PAGED_CUBIN=$(cub "$v") timeout 300 bin/cuda.test -test.run "${TESTS:-PagedAgainstCPU|PagedConformance}" -test.timeout 280s > $out/test-$n.txt 2>&1 || failed "tests $n"
    echo "$n: $(tail -1 $out/test-$n.txt)"
  done
fi
for r in $(seq ${ROUNDS:-1}); do
  for v in "${vs[@]}"; do n=${v%%:*}
    echo "# round $r variant $n" >> $out/bench.txt
    FP8ATTN_PAGED_CUBIN=$(cub "$v") bin/cuda.test -test.run '^$' -test.bench "${BENCH:-PagedDecodeWSSplits}" -test.benchtime 200x >> $out/bench.txt 2>&1 || failed "bench $n"
  done
done
grep -E '^(# round|Benchmark)' $out/bench.txt | sed -E 's/ +/ /g; s/Benchmark//; s/-16 [0-9]+ [0-9]+ ns\/op//'
(cd "$out" && tar czf logs.tgz *.txt *.log && rm -f *.txt *.log)
exit $status
