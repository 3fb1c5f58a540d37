#!/usr/bin/env bash
# Runs on the GPU machine (nvcc, PyTorch, no Go) from the repository root, with
# bin/cuda.test and bin/sdpabench cross-compiled here (README: "GPU tests").
# Builds the PTX, runs the GPU tests, benchmarks every stage and PyTorch in
# one run, and leaves everything under OUT (default ./out).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
export FP8ATTN_PTX=$PWD/backend/cuda/kernels/attention_compute_89.ptx
(cd backend/cuda/kernels && ./gen.sh) 2>&1 | tee "$out/gen.log" || exit 1
tar czf "$out/kernels.tgz" -C backend/cuda/kernels attention_compute_89.ptx resources.txt source_hash.go
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
bin/cuda.test -test.v -test.count=1 -test.run "${TESTS:-.}" > "$out/test.log" 2>&1; echo "tests rc=$?" | tee -a "$out/test.log"
grep -E "^(--- |FAIL|ok|PASS)|cuda_test.go" "$out/test.log" | grep -v "^    --- PASS" | head -60
if [ -n "${SKIP_BENCH:-}" ]; then tar czf "$out/results.tgz" -C "$out" test.log gen.log gpu.txt; exit 0; fi
for st in ${STAGES:-1 2 3 4 5 6 7 8}; do
  bin/sdpabench -kernel stage$st -shapes small,mission,long -json "$out/stage$st.json" 2>/dev/null
  bin/sdpabench -kernel stage$st -shapes large -nocheck -iters 50 -json "$out/stage$st-large.json" 2>/dev/null
done
python3 bench/torch_sdpa.py "$out/torch.json" 2>&1 | grep -v Warning
if [ -n "${NCU:-}" ]; then
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats -k "regex:stage${NCU}_d64" -c 1 \
    bin/sdpabench -kernel stage$NCU -shapes mission -nocheck -iters 5 > "$out/ncu.txt" 2>&1
  grep -E "Duration|Throughput|Achieved|Warp Cycles Per Issued" "$out/ncu.txt"
fi
# One archive: the device tool brings back at most 8 files.
tar czf "$out/results.tgz" -C "$out" $(cd "$out" && ls *.json *.log *.txt 2>/dev/null)
