#!/usr/bin/env python3
"""Compares BenchmarkStages outputs of two builds (scripts/gpu-run.sh writes
bench-old-rN.txt and bench-new-rN.txt, rounds alternating which ran first):
the median us/call of each (shape, kernel) over the rounds, and new/old.
A binary built before the kernels were named by target reports stages 9
and 10 as stage9 and stage10: those are read as sm90 and sm89."""
import glob, re, statistics, sys

out = sys.argv[1] if len(sys.argv) > 1 else "out"
pat = re.compile(r"BenchmarkStages/(\S+?)-\d+\s.*?([\d.]+) us/call")

def load(side):
    runs = {}
    for f in sorted(glob.glob(f"{out}/bench-{side}-r*.txt")):
        for line in open(f):
            m = pat.search(line)
            if m:
                key = m.group(1).replace("/stage9", "/sm90").replace("/stage10", "/sm89")
                runs.setdefault(key, []).append(float(m.group(2)))
    return {k: (statistics.median(v), len(v)) for k, v in runs.items()}

old, new = load("old"), load("new")
order = {"small": 0, "mission": 1, "long": 2, "large": 3}
kernels = ["sm90", "sm89", "sm80"] + [f"stage{i}" for i in range(1, 9)]
print(f"{'shape/kernel':18s} {'old us':>10s} {'new us':>10s} {'new/old':>8s}  (median of rounds)")
worst = 0.0
def rank(k):
    kernel = k.split('/')[1]
    return (order.get(k.split('/')[0], 9), kernels.index(kernel) if kernel in kernels else len(kernels))
for k in sorted(new, key=rank):
    if k in old:
        r = new[k][0] / old[k][0]
        worst = max(worst, r)
        print(f"{k:18s} {old[k][0]:10.2f} {new[k][0]:10.2f} {r:8.3f}  n={new[k][1]}")
if not worst:
    sys.exit("ab.py: no benchmark in common")
print(f"worst new/old: {worst:.3f}")
