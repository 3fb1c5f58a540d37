#!/usr/bin/env python3
"""sass_loop.py: the instruction budget of a kernel's main loop, from SASS.

Usage: cuobjdump -sass module.cubin | scripts/sass_loop.py REGEX

For every function whose name matches REGEX, finds the innermost loop that
holds the tensor-core instructions (a backward BRA whose range contains the
first QMMA, HMMA or QGMMA), and prints: the loop's static instruction count,
its opcode histogram, and the steady path that a tile takes once the row
maxima settle, per unrolled step of the loop (a step opens with the wait
for its copies and a block barrier) and as their mean. Run by
backend/cuda/kernels/gen.sh into resources.txt, for the Ada kernel
(fp8attn_stage10_*); docs/design/ada-prefill.md reads its figures there.
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
        # The steady path: a full tile (no mask), no row maximum moved (no
        # online-softmax step, no rescale), K copied by the dense path. The
        # loop may be unrolled into steps, one a tile, each opening with the
        # wait for its copies and a block barrier; in each step, skip what a
        # forward branch within the step jumps over when it is the online
        # step (the branch after the warp vote), the mask (16 or more FSEL,
        # the most common op, no tensor op) or the general copy path (every
        # LDGSTS in it with a zero-fill predicate).
        starts = []
        for a, op, _, _ in ins:
            if op.startswith("BAR.SYNC"):
                before = [x for x in ins if x[0] < a]
                starts.append(before[-1][0] if before and before[-1][1].startswith("DEPBAR") else a)
        if not starts:
            print("  no block barrier in the loop: no steps")
            continue
        starts[0] = lo
        ends = starts[1:] + [hi + 16]
        per_step = []
        for k, (s0, e0) in enumerate(zip(starts, ends)):
            step = [x for x in ins if s0 <= x[0] < e0]
            skip = set()
            for i, (a, op, pred, args) in enumerate(step):
                t = TARGET.search(args)
                if op.split(".")[0] != "BRA" or not t:
                    continue
                tgt = int(t.group(1), 16)
                if not a < tgt < e0:
                    continue
                body = [x for x in step if a < x[0] < tgt]
                h = Counter(x[1].split(".")[0] for x in body)
                vote = i > 0 and step[i - 1][1].startswith("VOTE")
                mask = h["FSEL"] >= 16 and h.most_common(1)[0][0] in ("FSEL", "ISETP") and not h["QMMA"]
                copies = [x for x in body if x[1].startswith("LDGSTS")]
                general = bool(copies) and all(re.search(r",\s*!?P\d\s*$", x[3]) for x in copies)
                if vote or mask or general:
                    skip.update(x[0] for x in body)
            steady = [x for x in step if x[0] not in skip]
            pad = sum(1 for _, _, pred, _ in steady if pred in ("@!PT", "@!UPT"))
            hs = Counter(op.split(".")[0] for _, op, pred, _ in steady if pred not in ("@!PT", "@!UPT"))
            per_step.append(len(steady) - pad)
            print(f"  step {k + 1} steady path (full tile, no max moved, dense K): {len(steady) - pad} instructions + {pad} padding")
            print("    " + " ".join(f"{k}={v}" for k, v in sorted(hs.items(), key=lambda kv: -kv[1])))
        print(f"  steady path per tile: {sum(per_step) / len(per_step):.1f} instructions (mean of {len(per_step)} steps)")

if __name__ == "__main__":
    main()
