#!/usr/bin/env python3
"""Summarizes scripts/hopper-ab.sh: DIR holds NAME-rR/ folders of
hopper-bench JSON; prints per shape the median over rounds of each build's
per-call graph-replay p50 (µs) and TFLOP/s (causal counted as half, as
sdpabench counts it)."""
import glob, json, os, statistics, sys

root = sys.argv[1]
runs = {}  # build -> shape -> [p50 of each round]
flops = {}
order = []
for d in sorted(glob.glob(os.path.join(root, "*-r*"))):
    base = os.path.basename(d)
    name = base.rpartition("-r")[0]
    if name not in order:
        order.append(name)
    for f in glob.glob(os.path.join(d, "hopper-sm90-*.json")):
        shape = os.path.basename(f)[len("hopper-sm90-"):-len(".json")]
        for rec in json.load(open(f)):
            runs.setdefault(name, {}).setdefault(shape, []).append(rec["gpu_p50_us"])
            flops[shape] = rec["gflops"] * rec["gpu_p50_us"] * 1e3  # FLOP of the call
shapes = sorted({s for n in runs for s in runs[n]}, key=lambda s: (len(s), s))
print("per-call p50 in graph replay, median over rounds (µs; TFLOP/s)")
print("%-28s" % "shape" + "".join("%22s" % n for n in order))
for s in shapes:
    row = "%-28s" % s
    for n in order:
        v = runs.get(n, {}).get(s)
        if not v:
            row += "%22s" % "-"
            continue
        med = statistics.median(v)
        row += "%13.2f %5.0f TF" % (med, flops[s] / (med * 1e-6) / 1e12)
    print(row)
