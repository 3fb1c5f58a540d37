#!/usr/bin/env bash
# Session 32, run 23: v23, v22 with the Q and K loads in whole sectors
# (FP8ATTN_QC_SECTORS of run 22 made the code): gen.sh builds it; the whole backend suite, the sdpa
# device tests and the three sanitizers on it; 20 repeats of the
# bit-exactness and concurrency tests; racecheck on run 11's failing seed;
# the broken builds; the stamps timeline; three rounds against v22 (the
# binary of 71d89aa with its embedded kernels).
set -u
export OUT
GEN=1 FULL=1 SANITIZE=1 SDPA_TESTS='Device|Graph|Cache|Conformance' TESTS='AttentionQuantizingBitExact|FastEncodeAllFloats|ConcurrentCalls' \
  VARIANTS="broken-qv:-DFP8ATTN_S9_BROKEN_QV=1 broken-amax:-DFP8ATTN_S9_BROKEN_AMAX=1 broken-qc:-DFP8ATTN_S9_BROKEN_QC=1 v23-stamps:-DFP8ATTN_QP_STAMPS=1" \
  OLD_BINS=v22 ROUNDS=3 timeout 560 bash scripts/quantpack-ab.sh
echo "quantpack-ab rc $?"
. scripts/gpu-lib.sh; use_built_kernels
bin/cuda.test -test.run 'AttentionQuantizingBitExact|ConcurrentCalls' -test.count 20 -test.timeout 300s > "$OUT/repeat20.txt" 2>&1
echo "20 repeats of the bit-exactness and concurrency tests: rc $? $(tail -1 "$OUT/repeat20.txt")"
FP8ATTN_SEED=1795491053995319535 timeout 300 compute-sanitizer --tool racecheck --error-exitcode 3 bin/cuda.test -test.run AttentionQuantizingBitExact > "$OUT/racecheck-seed.txt" 2>&1
echo "racecheck on run 11's failing seed: rc $? $(grep SUMMARY "$OUT/racecheck-seed.txt")"
grep -A3 "stage9qo" "$OUT/gen.log" backend/cuda/kernels/sm90a_build.log 2>/dev/null | grep -E "registers|spill|stack" | head -4
grep -E "stage9qo" backend/cuda/kernels/resources.txt
