#!/usr/bin/env python3
"""sass_outline.py: the outline of one function's SASS, for checking where a
kernel's waits landed.

Usage: cuobjdump -sass -fun NAME module.cubin > f.sass; scripts/sass_outline.py f.sass

Prints, in address order, every wgmma wait (WARPGROUP.DEPBAR), the last
QGMMA of each wgmma group (gsb0), barriers, votes and branches, and between
them the count of MUFU, F2FP and other instructions. For the Hopper kernel
(fp8attn_stage9_*; docs/design/hopper-prefill.md): ptxas hoists a wgmma wait
to the top of its basic block, so the outline shows whether the softmax's
MUFUs run before or after the wait for P·V.
"""
import re
import sys
from collections import Counter

LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
MARKS = ("DEPBAR", "gsb0", "BAR.", "VOTE", "BRA")


def outline(text):
    counts = Counter()
    for line in text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        addr, ins = m.groups()
        words = ins.split()
        op = words[1] if ins.startswith("@") else words[0]
        if any(k in ins for k in MARKS):
            if counts:
                yield "   [%s]" % ", ".join("%s=%d" % kv for kv in counts.items())
                counts = Counter()
            yield "%s %s" % (addr, ins[:60])
        else:
            counts["MUFU" if op.startswith("MUFU") else "F2FP" if op.startswith("F2FP") else "."] += 1
    if counts:
        yield "   [%s]" % ", ".join("%s=%d" % kv for kv in counts.items())


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print("\n".join(outline(f.read())))
