#!/usr/bin/env python3
"""ncu-stalls.py: warp-stall samples of one kernel from Nsight Compute's source page.

Usage: ncu-stalls.py SOURCE.csv[.gz] [TOP]

SOURCE is `ncu -i REPORT --page source --csv --print-source sass` (gzipped or
not), from a report taken with --set full (densest with
--warp-sampling-interval 0). Prints the total samples, the share of each stall
reason, the samples by opcode, and the TOP (default 25) instructions with the
most samples and their two main reasons. Samples count warps, idle ones too: a
warp parked at a barrier for the whole kernel is sampled all along, so a
reason's share is not the share of the kernel's time it costs.
"""
import csv
import gzip
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        r = csv.reader(f)
        next(r)  # "Kernel Name", name
        head = next(r)
        rows = [x for x in r if len(x) == len(head)]
    ix = {k: i for i, k in enumerate(head)}
    col = ix["Warp Stall Sampling (All Samples)"]
    reasons = [k for k in head if k.startswith("stall_") and "Not Issued" not in k]
    n = lambda x, k: int(x[ix[k]] or 0)
    total = sum(int(x[col] or 0) for x in rows)
    if total == 0:
        sys.exit("no samples")
    print(f"samples {total}, instructions {len(rows)}")
    share = {k: sum(n(x, k) for x in rows) for k in reasons}
    print(" ".join(f"{k[6:]} {100 * v / total:.1f}%" for k, v in sorted(share.items(), key=lambda t: -t[1])[:9]))
    ops = {}
    for x in rows:
        words = [w for w in x[1].split() if not w.startswith("@")]
        op = words[0].split(".")[0] if words else "?"
        ops[op] = ops.get(op, 0) + int(x[col] or 0)
    print("by opcode: " + " ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda t: -t[1])[:16]))
    for x in sorted(rows, key=lambda x: -int(x[col] or 0))[:top]:
        main2 = sorted(((n(x, k), k[6:]) for k in reasons), reverse=True)[:2]
        print(x[0][-5:], x[col], x[1].strip()[:70], main2)


if __name__ == "__main__":
    main()
