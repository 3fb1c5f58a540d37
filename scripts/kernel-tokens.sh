#!/usr/bin/env bash
# kernel-tokens.sh OLDREV [NEWDIR]: shows that the kernel modules' token
# streams after preprocessing are the same in OLDREV (a commit) and in the
# working tree (or NEWDIR, a checkout root), for every build gen.sh runs:
# attention.cu (compute_89, compute_80), attention_sm90a.cu (sm_90a),
# paged.cu (compute_89, compute_80, sm_90a), each as nvcc's device pass
# (__CUDA_ARCH__ set) and its host pass. No CUDA needed: the CUDA headers
# are empty stubs, so only the project's own code is compared. Prints one
# line per build, "same" or "DIFFERENT" (with a token diff under
# $TMPDIR/kernel-tokens/), and exits non-zero on a difference.
# EXTRA_DEFS adds -D options to the new tree's builds only.
set -euo pipefail
old=${1:?usage: kernel-tokens.sh OLDREV [NEWDIR]}
root=$(git rev-parse --show-toplevel)
new=${2:-$root}
work=${TMPDIR:-/tmp}/kernel-tokens
rm -rf "$work" && mkdir -p "$work/old" "$work/stub"
git -C "$root" archive "$old" backend/cuda/kernels wmma/include | tar -x -C "$work/old"
for h in cuda_fp16.h cuda_fp8.h mma.h stdint.h stddef.h cuda_runtime.h; do : > "$work/stub/$h"; done
tokens() { # file, defs...: the token stream, one token a line
  local f=$1; shift
  g++ -E -P -x c++ -std=c++17 -nostdinc -isystem "$work/stub" -D__CUDACC__ "$@" "$f" |
    python3 -c '
import re, sys
tok = re.compile(r"""\s*(?:("(?:\\.|[^"\\])*"|'"'"'(?:\\.|[^'"'"'\\])*'"'"')|([A-Za-z_]\w*)|(\.?\d(?:[eEpP][+-]|[\w.])*)|(<<=|>>=|->\*?|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||::|\.\.\.|[-+*/%&|^!=<>]=|##|\S))""")
s = sys.stdin.read()
for m in tok.finditer(s):
    t = next(g for g in m.groups() if g is not None)
    print(t)'
}
fail=0
for cfg in attention.cu:890 attention.cu:800 attention.cu:host attention_sm90a.cu:900 attention_sm90a.cu:host \
  paged.cu:890 paged.cu:800 paged.cu:900 paged.cu:host; do
  f=${cfg%%:*} a=${cfg##*:}
  defs=(); [ "$a" = host ] || defs=(-D__CUDA_ARCH__=$a)
  tokens "$work/old/backend/cuda/kernels/$f" "${defs[@]}" > "$work/$f.$a.old"
  # shellcheck disable=SC2086
  tokens "$new/backend/cuda/kernels/$f" "${defs[@]}" ${EXTRA_DEFS:-} > "$work/$f.$a.new"
  if cmp -s "$work/$f.$a.old" "$work/$f.$a.new"; then
    echo "same      $f $a ($(wc -l < "$work/$f.$a.new") tokens)"
  else
    diff "$work/$f.$a.old" "$work/$f.$a.new" > "$work/$f.$a.diff" || true
    echo "DIFFERENT $f $a ($(grep -c '^[<>]' "$work/$f.$a.diff") tokens; $work/$f.$a.diff)"; fail=1
  fi
done
exit $fail
