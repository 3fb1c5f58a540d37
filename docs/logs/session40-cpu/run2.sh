# Run 2 (session 40): the final tree (avx512bf16 a kernel set of its own: default on AMD, after
# avx512 on Intel) on the Xeon: the pair tests (conversions included), the backend's FP32/FP8 calls
# on avx512 and avx512bf16 at 1 thread, then run 1's public-call measure on old (33f682b) and new,
# three rounds alternated at 1 thread, and new twice at 16 threads.
set -u
r=$OUT/run2; mkdir -p $r
(cd backend/cpu && ../../bin/cpu-new.test -test.count 1 -test.v -test.run 'Pair|Conformance|NoAllocs|Steps4' > $r/cpu-tests.txt 2>&1; echo "rc $?" >> $r/cpu-tests.txt)
grep -E "^--- |^rc" $r/cpu-tests.txt
(cd backend/cpu && GOMAXPROCS=1 ../../bin/cpu-new.test -test.run '^$' -test.bench 'CPU/mission/fp(32|8)/avx512' -test.count 4 > $r/backend.txt 2>&1)
cd sdpa
for i in 1 2 3; do
  for b in old new; do
    GOMAXPROCS=1 ../bin/sdpa-$b.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.benchtime 0.5s -test.count 8 > $r/$b-r$i.txt 2>&1
  done
done
for i in 1 2; do
  GOMAXPROCS=16 ../bin/sdpa-new.test -test.run '^$' -test.bench 'PublicCall/FP(32|8E4M3)$' -test.benchtime 0.5s -test.count 8 > $r/new-t16-r$i.txt 2>&1
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
    print(f"{name:12s} FP32 ms median {statistics.median(f32):.3f}; FP8 ms median {statistics.median(f8):.3f}; "
          f"FP8/FP32 speed: median of pairs {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
for b in ("old", "new"):
    for i in (1, 2, 3):
        row(f"{b}-t1-r{i}", [f"{b}-r{i}.txt"])
    row(f"{b}-t1-all", [f"{b}-r{i}.txt" for i in (1, 2, 3)])
for i in (1, 2):
    row(f"new-t16-r{i}", [f"new-t16-r{i}.txt"])
PY
grep -E '^BenchmarkCPU' $r/backend.txt | awk '{print $1, $(NF-5), $(NF-4), $(NF-3), $(NF-2)}'
