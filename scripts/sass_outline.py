#!/usr/bin/env python3
"""sass_outline.py: the outline of one function's SASS, for checking where a
kernel's waits landed.

Usage: cuobjdump -sass -fun NAME module.cubin > f.sass; scripts/sass_outline.py f.sass

Prints, in address order, every wgmma wait (WARPGROUP.DEPBAR), the last
QGMMA of each wgmma group (gsb0), barriers, votes and branches, and between
them the count of MUFU, F2FP and other instructions. Used for stage 9 v3
(docs/PERF.md): ptxas hoists a wgmma wait to the top of its basic block, so
the outline shows whether the softmax's MUFUs run before or after the wait
for P·V.
"""
import re
import sys


lines=[l for l in open(sys.argv[1]) if re.search(r"/\*[0-9a-f]{4}\*/",l)]
out=[];prev=None;cnt=0;start=None
for l in lines:
    m=re.search(r"/\*([0-9a-f]{4})\*/\s+(.*?);",l)
    addr,ins=m.group(1),m.group(2)
    op=ins.split()[1] if ins.startswith('@') else ins.split()[0]
    if "DEPBAR" in ins or "gsb0" in ins or "BAR." in ins or "VOTE" in ins: key=ins[:60]
    elif op.startswith("MUFU"): key="MUFU"
    elif op.startswith("F2FP"): key="F2FP"
    elif op.startswith("BRA") or "BRA" in op: key=ins[:40]
    else: key="."
    if key==prev: cnt+=1
    else:
        if prev: out.append("%s x%d %s"%(start,cnt,prev))
        prev=key;cnt=1;start=addr
out.append("%s x%d %s"%(start,cnt,prev))
# compress MUFU/F2FP/. runs into blocks between markers
blk=[];agg={}
for o in out:
    a,c,k=o.split(" ",2); c=int(c[1:])
    if k in ("MUFU","F2FP","."):
        agg[k]=agg.get(k,0)+c
    else:
        if agg: blk.append("   [%s]"%", ".join("%s=%d"%(kk,vv) for kk,vv in agg.items())); agg={}
        blk.append(a+" "+k)
if agg: blk.append("   [%s]"%", ".join("%s=%d"%(kk,vv) for kk,vv in agg.items()))
print("\n".join(blk))
