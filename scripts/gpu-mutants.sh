#!/usr/bin/env bash
# gpu-mutants.sh: every kernel mutant (backend/cuda/kernels/mutants/*.sed,
# *.patch) must fail its tests. Runs on the GPU machine from the repository
# root, with bin/cuda-kerneldev.test cross-compiled here:
#   go test -c -tags cuda,kerneldev -o bin/cuda-kerneldev.test ./backend/cuda
# For each mutant: a copy of the kernel sources (and wmma/include, which
# they include), the mutant applied to every source (it must change exactly
# one place: one diff hunk), the modules its "# module:" line names built with
# gen.sh's flags, then the tests its "# tests:" line names run on those
# modules (FP8ATTN_PTX, FP8ATTN_CUBIN, FP8ATTN_PAGED_CUBIN). The script
# fails unless every mutant builds and fails its tests.
# CHECK=1 only applies the mutants (no nvcc, no GPU): any machine.
# Environment: OUT (default out; a log per mutant), MUTANTS (a regexp of
# mutant names, default all), TEST_BIN (default bin/cuda-kerneldev.test).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"; out=$(cd "$out" && pwd)
bin=${TEST_BIN:-bin/cuda-kerneldev.test}
[ -n "${CHECK:-}" ] || [ -x "$bin" ] || { [ -f "$bin.gz" ] && gunzip -f "$bin.gz" && chmod +x "$bin"; }
status=0
failed() { echo "gpu-mutants: FAILED: $*" | tee -a "$out/failures.txt"; status=1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
field() { sed -n "s/^# $1: *//p" "$2" | head -1; }
for m in backend/cuda/kernels/mutants/*.sed backend/cuda/kernels/mutants/*.patch; do
  [ -f "$m" ] || continue
  name=$(basename "${m%.*}")
  [[ $name =~ ${MUTANTS:-.} ]] || continue
  modules=$(field module "$m"); tests=$(field tests "$m")
  [ -n "$modules" ] && [ -n "$tests" ] || { failed "$name: no '# module:' or '# tests:' line"; continue; }
  root=$work/$name; mkdir -p "$root/backend/cuda"
  cp -r backend/cuda/kernels "$root/backend/cuda/" && cp -r wmma "$root/"
  k=$root/backend/cuda/kernels; rm -rf "$k/mutants"
  changed=0
  if [ "${m##*.}" = patch ]; then
    (cd "$root" && patch -s -p1 < "$OLDPWD/$m") || { failed "$name: the patch does not apply"; continue; }
    changed=$(cd "$root" && diff -r "$OLDPWD/backend/cuda/kernels" backend/cuda/kernels | grep -c '^[0-9]')
  else
    while IFS= read -r f; do
      sed -f "$m" "$f" > "$f.mut"
      changed=$((changed + $(diff "$f" "$f.mut" | grep -c '^[0-9]')))
      mv "$f.mut" "$f"
    done < <(find "$k" -name '*.cu' -o -name '*.cuh' -o -name '*.h')
  fi
  [ "$changed" = 1 ] || { failed "$name: changes $changed places in the sources, not 1"; continue; }
  [ -n "${CHECK:-}" ] && { echo "applies   $name ($modules: $tests)"; continue; }
  env=(); ok=1
  for mod in $modules; do
    case $mod in
      attention.cu) o=$work/$name-attention.ptx; flags=(-ptx -arch=compute_89); env+=(FP8ATTN_PTX=$o) ;;
      attention_sm90a.cu) o=$work/$name-attention.cubin; flags=(-cubin -gencode=arch=compute_90a,code=sm_90a); env+=(FP8ATTN_CUBIN=$o) ;;
      paged.cu) o=$work/$name-paged.cubin; flags=(-cubin -gencode=arch=compute_90a,code=sm_90a); env+=(FP8ATTN_PAGED_CUBIN=$o) ;;
      *) failed "$name: unknown module $mod"; ok=0; continue ;;
    esac
    (cd "$k" && nvcc -O3 -std=c++17 "${flags[@]}" -o "$o" "$mod") >> "$out/mutant-$name.log" 2>&1 || { failed "$name: building $mod (mutant-$name.log)"; ok=0; }
  done
  [ $ok = 1 ] || continue
  run="^($(echo $tests | tr ' ' '|'))\$"
  if env "${env[@]}" timeout 600 "$bin" -test.run "$run" -test.timeout 590s >> "$out/mutant-$name.log" 2>&1; then
    failed "$name passed $run (mutant-$name.log)"
  else
    echo "killed    $name ($(grep -m1 -E '^--- FAIL' "$out/mutant-$name.log" | sed 's/ (.*//'))"
  fi
done
exit $status
