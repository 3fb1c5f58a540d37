# Run 9 (session 38): run 7's measure (the FP32 and FP8 public calls alternated eight times in one
# process, 1 thread, mission shape) on new (0f25f9f) and new2 (the rounding's fast path,
# 732cc12), twice each, in turn.
set -u
r=$OUT/run9; mkdir -p $r
cd sdpa
for i in 1 2; do
  for b in new new2; do
    GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.benchtime 0.5s -test.count 8 > $r/$b-r$i.txt 2>&1
  done
done
cd ..
python3 - $r <<'PY' | tee $r/summary.txt
import re, statistics, sys
r = sys.argv[1]
for b in ("new", "new2"):
    f32, f8 = [], []
    for i in (1, 2):
        for line in open(f"{r}/{b}-r{i}.txt"):
            m = re.match(r"BenchmarkPublicCall/(FP32|FP8E4M3)\s+\d+\s+(\d+) ns/op", line)
            if m: (f32 if m.group(1) == "FP32" else f8).append(int(m.group(2)) / 1e6)
    ratios = [a / b_ for a, b_ in zip(f32, f8)]
    print(f"{b:7s} FP32 ms median {statistics.median(f32):.3f} min {min(f32):.3f}; FP8 ms median {statistics.median(f8):.3f} min {min(f8):.3f}; "
          f"FP8/FP32 speed: median of pairs {statistics.median(ratios):.3f}, of fastest {min(f32)/min(f8):.3f}")
PY
