#!/usr/bin/env bash
# Runs the host-code mutants: each NAME.sed here is a deliberately broken
# variant of one source file (its "# file:" line) that the test command of
# its "# test:" line must fail. A mutant whose "# needs:" names something
# this machine lacks (amx: the AMX tiles; qemu-arm64: qemu-aarch64-static)
# is skipped. Usage: run.sh [NAME...]; exit status 1 when a mutant passes
# its tests or its sed changes nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$here"/*.sed; do names+=("$(basename "$f" .sed)"); done
fi
fail=0
for name in "${names[@]}"; do
  m="$here/$name.sed"
  file=$(sed -n 's/^# file: //p' "$m")
  test=$(sed -n 's/^# test: //p' "$m")
  needs=$(sed -n 's/^# needs: //p' "$m")
  case "$needs" in
    amx) grep -q amx_tile /proc/cpuinfo || { echo "SKIP $name (no AMX here)"; continue; } ;;
    qemu-arm64) command -v qemu-aarch64-static >/dev/null || { echo "SKIP $name (no qemu-aarch64-static)"; continue; } ;;
  esac
  tmp=$(mktemp -d)
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tmp")
  sed -i -f "$m" "$tmp/$file"
  if cmp -s "$root/$file" "$tmp/$file"; then
    echo "FAIL $name: the sed changes nothing in $file"; fail=1; rm -rf "$tmp"; continue
  fi
  if (cd "$tmp" && eval "$test") >"$tmp.log" 2>&1; then
    echo "FAIL $name: $test passed on the mutant"; tail -20 "$tmp.log"; fail=1
  else
    if ! grep -q -- '--- FAIL' "$tmp.log"; then
      echo "FAIL $name: $test fails without a failing test (a build error?)"; tail -20 "$tmp.log"; fail=1
    else
      echo "ok   $name: $test fails on the mutant: $(grep -m1 -- '--- FAIL' "$tmp.log" | sed 's/^ *//')"
    fi
  fi
  rm -rf "$tmp" "$tmp.log"
done
exit $fail
