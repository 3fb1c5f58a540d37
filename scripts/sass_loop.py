#!/usr/bin/env python3
"""sass_loop.py: the instruction budget of a kernel's main loop, from SASS.

Usage: cuobjdump -sass module.cubin | scripts/sass_loop.py REGEX

For every function whose name matches REGEX, finds the innermost loop that
holds the tensor-core instructions (a backward BRA whose range contains the
first QMMA, HMMA or QGMMA), and prints: the loop's static instruction count
and its opcode histogram; each forward branch inside the loop with the
instructions it can skip (conditional regions: the mask, the rescale, the
prefetch), so that the path a steady-state tile takes can be counted. Run by backend/cuda/kernels/gen.sh into resources.txt; docs/PERF.md
reads the figures of stage 10 from there.
"""
import re
import sys
from collections import Counter

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
FUNC = re.compile(r"Function : (\S+)")
TARGET = re.compile(r"0x([0-9a-f]+)")
TENSOR = ("QMMA", "HMMA", "QGMMA", "HGMMA")


def functions(text):
    name, body = None, []
    for line in text.splitlines():
        f = FUNC.search(line)
        if f:
            if name:
                yield name, body
            name, body = f.group(1), []
            continue
        m = LINE.search(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(3), (m.group(2) or "").strip(), m.group(4)))
    if name:
        yield name, body


def loop_of(body):
    """The innermost backward branch range containing the first tensor op."""
    first = next((a for a, op, _, _ in body if op.split(".")[0] in TENSOR), None)
    if first is None:
        return None
    best = None
    for a, op, _, args in body:
        if op.split(".")[0] != "BRA":
            continue
        t = TARGET.search(args)
        if not t:
            continue
        tgt = int(t.group(1), 16)
        if tgt <= first <= a and (best is None or a - tgt < best[1] - best[0]):
            best = (tgt, a)
    return best


def main():
    pat = re.compile(sys.argv[1] if len(sys.argv) > 1 else ".")
    for name, body in functions(sys.stdin.read()):
        if not pat.search(name):
            continue
        lp = loop_of(body)
        if not lp:
            print(f"{name}: no loop around a tensor-core instruction")
            continue
        lo, hi = lp
        ins = [(a, op, pred, args) for a, op, pred, args in body if lo <= a <= hi]
        hist = Counter(op.split(".")[0] for _, op, _, _ in ins)
        f2fp = sum(1 for _, op, _, _ in ins if op.startswith("F2FP"))
        print(f"{name}: loop 0x{lo:x}-0x{hi:x}: {len(ins)} instructions")
        print("  " + " ".join(f"{k}={v}" for k, v in sorted(hist.items(), key=lambda kv: -kv[1])))
        print(f"  F2FP in the loop: {f2fp} ({', '.join(sorted({op for _, op, _, _ in ins if op.startswith('F2FP')}))})")
        regions = []
        for a, op, pred, args in ins:
            if op.split(".")[0] != "BRA" or a == hi:
                continue
            t = TARGET.search(args)
            if not t:
                continue
            tgt = int(t.group(1), 16)
            if a < tgt <= hi + 16:
                skipped = [x for x in ins if a < x[0] < tgt]
                h = Counter(x[1].split(".")[0] for x in skipped)
                top = " ".join(f"{k}={v}" for k, v in h.most_common(6))
                regions.append((a, tgt, len(skipped)))
                print(f"  {pred or 'always'} BRA at 0x{a:x} skips {len(skipped)} to 0x{tgt:x}: {top}")
        never = sum(1 for _, _, pred, _ in ins if pred in ("@!PT", "@!UPT"))
        print(f"  regions skippable by branches: {len(regions)}; never-executed padding (@!PT, @!UPT): {never}")
        # The steady path: a full tile (no mask), the row maxima unmoved (no
        # rescale), K copied by the dense path: skip the mask region (FSEL
        # most common), the rescale region (FMUL only) and what an
        # unconditional BRA jumps over (the general copy path).
        skip = set()
        for a, tgt, n in regions:
            body = [x for x in ins if a < x[0] < tgt]
            h = Counter(x[1].split(".")[0] for x in body)
            pred = next(p for x, _, p, _ in ins if x == a)
            mask = h and h.most_common(1)[0][0] in ("FSEL", "ISETP") and h["FSEL"] >= 16
            rescale = h and set(h) == {"FMUL"}
            if mask or rescale or not pred:
                skip.update(x[0] for x in body)
        steady = [x for x in ins if x[0] not in skip]
        sn = sum(1 for _, _, pred, _ in steady if pred in ("@!PT", "@!UPT"))
        hs = Counter(op.split(".")[0] for _, op, pred, _ in steady if pred not in ("@!PT", "@!UPT"))
        print(f"  steady path (full tile, no rescale, dense K): {len(steady)} issue slots, {len(steady) - sn} instructions + {sn} padding")
        print("    " + " ".join(f"{k}={v}" for k, v in sorted(hs.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
