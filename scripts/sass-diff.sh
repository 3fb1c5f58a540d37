#!/usr/bin/env bash
# sass-diff.sh OLD NEW: compares the SASS of two builds of the kernel
# modules, function by function, on a machine with the CUDA toolkit (ptxas,
# cuobjdump). OLD and NEW are folders holding gen.sh's outputs
# (attention_compute_89.ptx, attention_compute_80.ptx,
# attention_sm_90a.cubin, attention_compute_90a.ptx, paged_compute_89.ptx,
# paged_compute_80.ptx, paged_sm_90a.cubin); OLD may instead be a commit,
# whose committed modules are taken (git show). The cubins are
# disassembled as they are; the compute_89 PTX is assembled for sm_89 and
# sm_90, the compute_80 PTX for sm_80 and the compute_90a PTX for sm_90a
# (ptxas -O3, as the driver's JIT would). Each function's SASS is compared
# without addresses and encodings, in any function order. Prints
# "identical: N functions" or every function that differs or exists on one
# side only (with a diff of its SASS under $TMPDIR/sass-diff), and exits
# non-zero on a difference. GONE, a regexp of function names, lists the
# functions expected to be in OLD only (removed from the modules) as
# "removed" without counting them as differences.
set -euo pipefail
old=${1:?usage: sass-diff.sh OLD NEW}; new=${2:?usage: sass-diff.sh OLD NEW}
work=${TMPDIR:-/tmp}/sass-diff; rm -rf "$work"; mkdir -p "$work/old" "$work/new"
modules="attention_compute_89.ptx attention_compute_80.ptx attention_sm_90a.cubin attention_compute_90a.ptx
  paged_compute_89.ptx paged_compute_80.ptx paged_sm_90a.cubin"
if [ ! -d "$old" ]; then # a commit
  rev=$old; old=$work/old-modules; mkdir -p "$old"
  for m in $modules; do git show "$rev:backend/cuda/kernels/$m" > "$old/$m"; done
fi
# split SIDE FOLDER: one file per (module build, function) of SASS text.
split() {
  local side=$1 dir=$2 m arch sass
  for m in $modules; do
    [ -f "$dir/$m" ] || { echo "sass-diff: $dir/$m missing" >&2; exit 2; }
    case $m in
      *.cubin) archs=cubin ;;
      *compute_89.ptx) archs="sm_89 sm_90" ;;
      *compute_80.ptx) archs=sm_80 ;;
      *compute_90a.ptx) archs=sm_90a ;;
    esac
    for arch in $archs; do
      sass=$work/$side/$m.$arch.sass
      if [ $arch = cubin ]; then cuobjdump -sass "$dir/$m" > "$sass"
      else ptxas -O3 -arch=$arch -o "$work/$side/$m.$arch.cubin" "$dir/$m" && cuobjdump -sass "$work/$side/$m.$arch.cubin" > "$sass"; fi
      # Instructions without their /*addr*/ prefix and /* 0x... */ encodings.
      awk -v out="$work/$side/f" -v tag="$m.$arch" '
        /Function : / { f = out "/" tag "." $3; print "" > f; next }
        f && /\/\*[0-9a-f]+\*\// { line = $0; sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/, "", line); sub(/[ \t]*\/\*[^*]*\*\/[ \t]*$/, "", line); sub(/[ \t]*;[ \t]*$/, "", line); print line >> f }
      ' "$sass"
    done
  done
}
mkdir -p "$work/old/f" "$work/new/f"
split old "$old"; split new "$new"
n=0; bad=0
for f in $( (ls "$work/old/f"; ls "$work/new/f") | LC_ALL=C sort -u); do
  if [ ! -f "$work/old/f/$f" ]; then echo "only in new: $f"; bad=$((bad + 1))
  elif [ ! -f "$work/new/f/$f" ] && [ -n "${GONE:-}" ] && [[ ${f##*.} =~ $GONE ]]; then echo "removed: $f"
  elif [ ! -f "$work/new/f/$f" ]; then echo "only in old: $f"; bad=$((bad + 1))
  elif ! cmp -s "$work/old/f/$f" "$work/new/f/$f"; then
    diff "$work/old/f/$f" "$work/new/f/$f" > "$work/$f.diff" || true
    echo "differs: $f ($(grep -c '^[<>]' "$work/$f.diff") lines; $work/$f.diff)"; bad=$((bad + 1))
  else n=$((n + 1)); fi
done
if [ $bad = 0 ]; then echo "identical: $n functions"; else echo "sass-diff: $bad functions differ, $n identical"; exit 1; fi
