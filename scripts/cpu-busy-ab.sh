#!/usr/bin/env bash
# Times two sdpa test binaries (OLD, NEW: go test -c ./sdpa) on the public mission call, FP32 and
# FP8E4M3, at GOMAXPROCS 1 and 2, with one core kept busy by `yes` (pinned to CPU 1; UNPINNED=1
# leaves it to the scheduler), ROUNDS rounds (default 5), the order of the two alternating round by
# round. Prints one line a run: round, binary, workers, benchmark, ns/op; then per binary and
# precision the per-round 2-worker/1-worker speeds and their median.
# Usage: [ROUNDS=5] [UNPINNED=1] scripts/cpu-busy-ab.sh OLD NEW
set -u
a=$1; b=$2; n=${ROUNDS:-5}
if [ -n "${UNPINNED:-}" ]; then yes > /dev/null & else taskset -c 1 yes > /dev/null & fi
ypid=$!
trap 'kill $ypid' EXIT
sleep 0.5
out=$(mktemp)
for i in $(seq 1 "$n"); do
  if [ $((i % 2)) = 1 ]; then order="$a $b"; else order="$b $a"; fi
  for v in $order; do
    for w in 1 2; do
      GOMAXPROCS=$w "$v" -test.run '^$' -test.bench 'PublicCall$/^(FP32|FP8E4M3)$' -test.benchtime 300x 2>&1 |
        awk -v v="$v" -v w=$w -v i=$i '/^Benchmark/{print i, v, w, $1, $3}'
    done
  done
done | tee "$out"
python3 - "$out" <<'PY'
import collections, re, statistics, sys
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    i, v, w, name, ns = line.split()
    d[(v, re.sub(r"-\d+$", "", name.split("/")[1]))].setdefault(int(i), {})[w] = float(ns)
for (v, prec), rounds in sorted(d.items()):
    r = [x["1"] / x["2"] for x in rounds.values() if "1" in x and "2" in x]
    print(f"{v} {prec}: 2w/1w speed per round {[round(x, 2) for x in r]} median {statistics.median(r):.3f}")
PY
rm -f "$out"
