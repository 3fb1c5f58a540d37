# Run 4 (session 38): issue #11's FP8 target, the public FP8 call (sdpa.Attention from float32
# slices, quantization included) at >= 0.9x the speed of the FP32 call, mission shape:
# `go test -bench 'PublicCall/FP(32|8E4M3)$' ./sdpa` binaries of old (1c6907e) and new, six rounds,
# the binaries' order alternated round by round, at 1 and 16 threads; per-round speed ratios
# (FP32 time / FP8 time) and their medians in summary.txt.
set -u
r=$OUT/run4; mkdir -p $r
lscpu > $r/lscpu.txt; grep -m1 'Model name' $r/lscpu.txt
cd sdpa
for i in 1 2 3 4 5 6; do
  for t in 1 16; do
    order="old new"; [ $((i % 2)) = 0 ] && order="new old"
    for b in $order; do
      GOMAXPROCS=$t ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.count 1 > $r/$b-t$t-r$i.txt 2>&1
    done
  done
done
cd ..
python3 - $r <<'PY' | tee $r/summary.txt
import re, statistics, sys, glob
r = sys.argv[1]
def ns(f):
    d = {}
    for line in open(f):
        m = re.match(r"BenchmarkPublicCall/(FP32|FP8E4M3)(-\d+)?\s+\d+\s+(\d+) ns/op", line)
        if m: d[m.group(1)] = int(m.group(3))
    return d
for t in (1, 16):
    for b in ("old", "new"):
        rows = [ns(f"{r}/{b}-t{t}-r{i}.txt") for i in range(1, 7)]
        ratios = [x["FP32"] / x["FP8E4M3"] for x in rows]
        print(f"threads {t:2d} {b}: FP32 ms {[round(x['FP32']/1e6, 3) for x in rows]} FP8 ms {[round(x['FP8E4M3']/1e6, 3) for x in rows]}")
        print(f"threads {t:2d} {b}: FP8/FP32 speed per round {[round(x, 3) for x in ratios]} median {statistics.median(ratios):.3f}; fastest rounds {min(x['FP32'] for x in rows)/min(x['FP8E4M3'] for x in rows):.3f}")
PY
cd $OUT && tar czf run4.tgz run4 && rm -rf run4/*-r*.txt
