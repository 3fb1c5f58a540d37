#!/usr/bin/env bash
# Accuracy A/B of the FP8 tensor-core kernels' builds, on the GPU machine,
# from the repository root, with bin/cuda.test cross-compiled here: builds
# the kernels (gen.sh, the defaults: OUT/kernels.tgz) and, in parallel, the
# variants the build macros name (hopper.cuh's FP8ATTN_S9_PROMOTE and
# FP8ATTN_S9_LSUM, ada.cuh's FP8ATTN_S10_LSUM), then runs TestFP8PAccuracy
# on each with one seed (FP8ATTN_SEED, default 16), and, unless FULL=0, the
# whole backend suite and the sdpa cuda tests on the defaults. Prints the
# ratios (error over the input-quantization error) per build; logs and the
# variants' ptxas reports in OUT/accuracy-ab.tgz. Exits non-zero if a build
# or the default build's tests fail (a variant failing is the point).
set -uo pipefail
name=accuracy-ab
. "$(dirname "$0")/gpu-lib.sh"
unpack_bins
use_built_kernels
work=$(mktemp -d)
hopper_flags="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
declare -A s9=([running]="-DFP8ATTN_S9_PROMOTE=0 -DFP8ATTN_S9_LSUM=0" [promote-only]="-DFP8ATTN_S9_LSUM=0" [lsum-only]="-DFP8ATTN_S9_PROMOTE=0")
for v in "${!s9[@]}"; do
  (cd "$kernels_dir" && nvcc $hopper_flags ${s9[$v]} -cubin -Xptxas -v -o "$work/s9-$v.cubin" attention_sm90a.cu > "$work/s9-$v.ptxas.log" 2>&1) &
done
(cd "$kernels_dir" && nvcc -O3 -std=c++17 -ptx -arch=compute_89 -DFP8ATTN_S10_LSUM=0 -o "$work/s10-running.ptx" attention.cu) &
build_kernels || { cat "$out/gen.log"; failed "gen.sh"; }
wait
grep -A2 "stage9_d" "$kernels_dir/resources.txt" | grep -E "entry|spill|Used" | head -20
for v in "${!s9[@]}"; do [ -s "$work/s9-$v.cubin" ] || failed "build $v"; grep -A2 "stage9_d" "$work/s9-$v.ptxas.log" | grep -E "spill" | sort | uniq -c | sed "s/^/$v: /"; done
export FP8ATTN_SEED=${FP8ATTN_SEED:-16}
acc() {  # acc LABEL RUN [VAR=VALUE ...]
  local label=$1 run=$2; shift 2
  (cd backend/cuda && env "$@" ../../bin/cuda.test -test.run "$run" -test.v -test.timeout 400s > "$work/acc-$label.log" 2>&1)
  local rc=$?
  echo "== $label (rc $rc)"
  grep -oE "\{B:.*ratio [0-9.]+" "$work/acc-$label.log" | sed -E 's/relative L2 vs exact: //; s/ \(0: BestStage\)//'
  return $rc
}
acc default 'TestFP8PAccuracy' || failed "TestFP8PAccuracy on the defaults"
for v in "${!s9[@]}"; do acc "s9-$v" 'TestFP8PAccuracy/sm90' FP8ATTN_CUBIN="$work/s9-$v.cubin"; done
acc s10-running 'TestFP8PAccuracy/sm89' FP8ATTN_PTX="$work/s10-running.ptx"
if [ "${FULL:-1}" != 0 ]; then
  (cd backend/cuda && timeout 300 ../../bin/cuda.test -test.timeout 290s > "$work/full.log" 2>&1) || failed "backend suite (full.log)"
  grep -E "^(--- FAIL|FAIL|ok|PASS)" "$work/full.log" | head -20
  (cd sdpa && timeout 200 ../bin/sdpa-cuda.test -test.timeout 190s > "$work/sdpa.log" 2>&1) || failed "sdpa cuda tests (sdpa.log)"
  tail -3 "$work/sdpa.log"
fi
tar czf "$out/accuracy-ab.tgz" -C "$work" $(cd "$work" && ls *.log)
exit $status
