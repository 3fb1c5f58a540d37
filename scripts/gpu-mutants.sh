#!/usr/bin/env bash
# gpu-mutants.sh: every kernel mutant (backend/cuda/kernels/mutants/*.sed,
# *.patch) must fail its tests. Runs on the GPU machine from the repository
# root, with bin/cuda-kerneldev.test cross-compiled here:
#   go test -c -tags cuda,kerneldev -o bin/cuda-kerneldev.test ./backend/cuda
# For each mutant: a copy of the kernel sources (and wmma/include, which
# they include), the mutant applied to every source (it must change exactly
# one place: one diff hunk), the modules its "# module:" line names built
# with gen.sh's flags, then the tests its "# tests:" line names run on
# those modules (FP8ATTN_PTX, FP8ATTN_CUBIN, FP8ATTN_PAGED_CUBIN, and the
# test modules' FP8ATTN_TEST_PTX, FP8ATTN_TEST_CUBIN). The
# unmutated sources, built the same way (the control), must pass every
# test the mutants name, so that a mutant's failure is the mutant's. The
# builds run in parallel (JOBS at a time, default the CPUs), then the tests
# one after the other. The script fails unless the control passes and every
# mutant builds and fails its tests. A mutant's tests are backend/cuda's
# unless its "# bin: sdpa" line names package sdpa's (its GPU tests, the
# public calls), run from SDPA_TEST_BIN (default
# bin/sdpa-kerneldev.test: go test -c -tags cuda,kerneldev -o
# bin/sdpa-kerneldev.test ./sdpa); the control runs each binary's tests.
# CHECK=1 only applies the mutants (no nvcc, no GPU): any machine.
# Environment: OUT (default out; a log per mutant), MUTANTS (a regexp of
# mutant names, default all: split the set to stay within a time limit,
# e.g. '^paged-' and '^(s9|qp|pdl)-'), TEST_BIN (default
# bin/cuda-kerneldev.test), SDPA_TEST_BIN, JOBS.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
declare -A bins=([cuda]=${TEST_BIN:-bin/cuda-kerneldev.test} [sdpa]=${SDPA_TEST_BIN:-bin/sdpa-kerneldev.test})
for b in "${bins[@]}"; do
  [ -n "${CHECK:-}" ] || [ -x "$b" ] || { [ -f "$b.gz" ] && gunzip -f "$b.gz" && chmod +x "$b"; }
done
status=0
failed() { echo "gpu-mutants: FAILED: $*" | tee -a "$out/failures.txt"; status=1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
field() { sed -n "s/^# $1: *//p" "$2" | head -1; }
# module FILE: the output and the FP8ATTN_* variable of a module build.
module() {
  case $1 in
    attention.cu) echo "ptx FP8ATTN_PTX -ptx -arch=compute_89" ;;
    attention_sm90a.cu) echo "cubin FP8ATTN_CUBIN -cubin --split-compile=4 -gencode=arch=compute_90a,code=sm_90a" ;;
    paged.cu) echo "cubin FP8ATTN_PAGED_CUBIN -cubin -gencode=arch=compute_90a,code=sm_90a" ;;
    testkernels.cu) echo "ptx FP8ATTN_TEST_PTX -ptx -arch=compute_80" ;;
    testkernels_sm90a.cu) echo "cubin FP8ATTN_TEST_CUBIN -cubin -gencode=arch=compute_90a,code=sm_90a" ;;
  esac
}
# 1. Apply: a copy of the sources per mutant, and the control's.
names=()
declare -A alltests=()
for m in backend/cuda/kernels/mutants/*.sed backend/cuda/kernels/mutants/*.patch; do
  [ -f "$m" ] || continue
  name=$(basename "${m%.*}")
  [[ $name =~ ${MUTANTS:-.} ]] || continue
  modules=$(field module "$m"); tests=$(field tests "$m"); mbin=$(field bin "$m"); mbin=${mbin:-cuda}
  [ -n "$modules" ] && [ -n "$tests" ] || { failed "$name: no '# module:' or '# tests:' line"; continue; }
  [ -n "${bins[$mbin]:-}" ] || { failed "$name: unknown '# bin: $mbin'"; continue; }
  for mod in $modules; do [ -n "$(module "$mod")" ] || { failed "$name: unknown module $mod"; continue 2; }; done
  root=$work/$name; mkdir -p "$root/backend/cuda"
  cp -r backend/cuda/kernels "$root/backend/cuda/" && cp -r wmma "$root/"
  k=$root/backend/cuda/kernels; rm -rf "$k/mutants"
  changed=0
  if [ "${m##*.}" = patch ]; then
    (cd "$root" && patch -s -p1 < "$OLDPWD/$m") || { failed "$name: the patch does not apply"; continue; }
    changed=$(diff -r backend/cuda/kernels "$k" | grep -c '^[0-9]')
  else
    while IFS= read -r f; do
      sed -f "$m" "$f" > "$f.mut"
      changed=$((changed + $(diff "$f" "$f.mut" | grep -c '^[0-9]')))
      mv "$f.mut" "$f"
    done < <(find "$k" -name '*.cu' -o -name '*.cuh' -o -name '*.h')
  fi
  [ "$changed" = 1 ] || { failed "$name: changes $changed places in the sources, not 1"; continue; }
  if [ -n "${CHECK:-}" ]; then echo "applies   $name ($modules: $mbin $tests)"; continue; fi
  names+=("$name"); echo "$modules" > "$work/$name.modules"; echo "$tests" > "$work/$name.tests"; echo "$mbin" > "$work/$name.bin"
  alltests[$mbin]="${alltests[$mbin]:-} $tests"
done
[ -n "${CHECK:-}" ] && exit $status
[ ${#names[@]} -gt 0 ] || { echo "gpu-mutants: no mutant matches ${MUTANTS:-.}"; exit $status; }
mkdir -p "$work/control/backend/cuda" && cp -r backend/cuda/kernels "$work/control/backend/cuda/" && cp -r wmma "$work/control/"
echo "attention.cu attention_sm90a.cu paged.cu testkernels.cu testkernels_sm90a.cu" > "$work/control.modules"
# 2. Build, in parallel.
jobs=${JOBS:-$(nproc)}
for name in control "${names[@]}"; do
  for mod in $(cat "$work/$name.modules"); do
    read -r ext var flags <<< "$(module "$mod")"
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    # shellcheck disable=SC2086
    (cd "$work/$name/backend/cuda/kernels" && nvcc -O3 -std=c++17 $flags -o "$work/$name-$mod.$ext" "$mod") > "$work/$name-$mod.log" 2>&1 &
  done
done
wait
# runenv NAME: the FP8ATTN_* assignments that point at NAME's modules.
runenv() {
  local mod ext var flags
  for mod in $(cat "$work/$1.modules"); do
    read -r ext var flags <<< "$(module "$mod")"
    [ -s "$work/$1-$mod.$ext" ] || { cat "$work/$1-$mod.log" >> "$out/mutant-$1.log"; return 1; }
    echo "$var=$work/$1-$mod.$ext"
  done
}
# 3. Test: the control (each binary's tests), then each mutant.
if ! env=$(runenv control); then failed "building the control (mutant-control.log)"
else
  for mbin in "${!alltests[@]}"; do
    # shellcheck disable=SC2086
    run="^($(printf '%s\n' ${alltests[$mbin]} | sort -u | paste -sd '|'))\$"
    if env $env timeout 600 "${bins[$mbin]}" -test.run "$run" -test.timeout 590s >> "$out/mutant-control.log" 2>&1; then
      echo "passes    control ($mbin: $run)"
    else failed "the control (unmutated sources) fails $mbin's $run (mutant-control.log)"; fi
  done
fi
for name in "${names[@]}"; do
  env=$(runenv "$name") || { failed "$name: the build failed (mutant-$name.log)"; continue; }
  run="^($(tr ' ' '|' < "$work/$name.tests"))\$"
  if env $env timeout 600 "${bins[$(cat "$work/$name.bin")]}" -test.run "$run" -test.timeout 590s >> "$out/mutant-$name.log" 2>&1; then
    failed "$name passed $run (mutant-$name.log)"
  else
    echo "killed    $name ($(grep -m1 -E '^--- FAIL' "$out/mutant-$name.log" | sed 's/ (.*//'))"
  fi
done
exit $status
