# Run 1 (session 40): the bfloat16-pair score kernel (VDPBF16PS) on the Xeon: its tests
# (Intel's VDPBF16PS bit-exact against the Go model), its step benchmark, then run 9's
# measure (session 38: the FP32 and FP8 public calls alternated eight times in one process,
# mission shape) on old (33f682b) and new (33f682b + the pair kernel), twice each, in turn,
# at 1 thread, and once each at 16 threads.
set -u
r=$OUT/run1; mkdir -p $r
lscpu | grep -i -E 'model name|flags' | sed 's/flags.*\(avx512_bf16\).*/flags: has \1/' > $r/cpu.txt
(cd backend/cpu && ../../bin/cpu-new.test -test.count 1 -test.v -test.run 'Pairs|Conformance|NoAllocs|Steps4' > $r/cpu-tests.txt 2>&1; echo "rc $?" >> $r/cpu-tests.txt)
tail -3 $r/cpu-tests.txt
(cd backend/cpu && GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench 'Steps4Pairs' -test.count 6 > $r/steps.txt 2>&1)
cd sdpa
for i in 1 2; do
  for b in old new; do
    GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.benchtime 0.5s -test.count 8 > $r/$b-r$i.txt 2>&1
  done
done
for b in old new; do
  GOMAXPROCS=16 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.benchtime 0.5s -test.count 8 > $r/$b-t16.txt 2>&1
done
cd ..
python3 - $r <<'PY' | tee $r/summary.txt
import re, statistics, sys
r = sys.argv[1]
def row(name, files):
    f32, f8 = [], []
    for f in files:
        for line in open(f"{r}/{f}"):
            m = re.match(r"BenchmarkPublicCall/(FP32|FP8E4M3)(-\d+)?\s+\d+\s+(\d+) ns/op", line)
            if m: (f32 if m.group(1) == "FP32" else f8).append(int(m.group(3)) / 1e6)
    ratios = [a / b_ for a, b_ in zip(f32, f8)]
    print(f"{name:9s} FP32 ms median {statistics.median(f32):.3f} min {min(f32):.3f}; FP8 ms median {statistics.median(f8):.3f} min {min(f8):.3f}; "
          f"FP8/FP32 speed: median of pairs {statistics.median(ratios):.3f}, of fastest {min(f32)/min(f8):.3f}")
for b in ("old", "new"):
    row(b + "-t1", [f"{b}-r1.txt", f"{b}-r2.txt"])
    row(b + "-t16", [f"{b}-t16.txt"])
PY
grep -E 'Steps4Pairs' $r/steps.txt | head -12
