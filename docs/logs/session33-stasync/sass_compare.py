#!/usr/bin/env python3
"""sass_compare.py A.sass B.sass: which functions of two `cuobjdump -sass`
listings differ (instruction text and encodings, addresses ignored)."""
import re
import sys


def functions(path):
    funcs, name = {}, None
    for line in open(path):
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            funcs[name] = []
        elif name and "/*" in line:
            funcs[name].append(re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip())
    return funcs


a, b = functions(sys.argv[1]), functions(sys.argv[2])
same = [n for n in sorted(a) if a[n] == b.get(n)]
diff = [n for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)]
print(f"{len(same)} functions the same, {len(diff)} differ: {' '.join(diff) or '-'}")
sys.exit(1 if diff else 0)
