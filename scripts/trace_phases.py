#!/usr/bin/env python3
"""trace_phases.py: where one goroutine's time goes, per call, from a Go
execution trace (go test -trace), e.g. the host side of a GPU public call.

Usage: go tool trace -d=parsed TRACE | scripts/trace_phases.py FUNC MARK [SKIP]

Follows the goroutine whose stacks mention FUNC most often (the caller of the
benchmarked function, e.g. sdpa.AttentionInto), takes the window between its
SKIP-th (default 100, past warm-up) and last entry into a syscall whose stack
mentions MARK (once per call, e.g. cuStreamSynchronize), and prints the time
per call in each state: Running segments named by the function at which they
end, other states by the first non-runtime frame of the event that entered
them (for Runnable, the stack of the goroutine that woke it).
"""
import collections
import re
import sys

EVENT = re.compile(r"M=(\S+) P=(\S+) G=(\S+) (\w+) Time=(\d+)(.*)")


def events(lines):
    cur = None
    for ln in lines:
        if ln.startswith("M="):
            m = EVENT.match(ln)
            cur = None
            if m:
                cur = {"kind": m.group(4), "t": int(m.group(5)), "rest": m.group(6), "stack": []}
                yield cur
        elif cur is not None and ln.startswith("\t") and not ln.startswith("\t\t"):
            cur["stack"].append(ln.strip().split(" @")[0])


def frame(stack):
    own = [s for s in stack if not s.startswith(("runtime.", "sync.", "internal/"))]
    return own[0].split("/")[-1] if own else "?"


def main():
    func, mark = sys.argv[1], sys.argv[2]
    skip = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    ev = [e for e in events(sys.stdin.read().split("\n")) if e["kind"] == "StateTransition"]
    count = collections.Counter()
    for e in ev:
        g = re.search(r"GoID=(\d+)", e["rest"])
        if g and any(func in s for s in e["stack"]):
            count[g.group(1)] += 1
    if not count:
        sys.exit(f"no goroutine's stack mentions {func}")
    gid = count.most_common(1)[0][0]
    tr = [e for e in ev if re.search(r"GoID=%s " % gid, e["rest"])]
    marks = [e["t"] for e in tr if "Running->Syscall" in e["rest"] and any(mark in s for s in e["stack"])]
    if len(marks) <= skip + 1:
        sys.exit(f"only {len(marks)} entries into {mark}")
    t0, t1, calls = marks[skip], marks[-1], len(marks) - 1 - skip
    print(f"goroutine {gid}: {calls} calls, {(t1 - t0) / 1e3 / calls:.1f} us per call")
    acc, n = collections.Counter(), collections.Counter()
    for a, b in zip(tr, tr[1:]):
        if a["t"] < t0 or b["t"] > t1:
            continue
        state = re.search(r"->(\w+)", a["rest"]).group(1)
        key = (state, "until " + frame(b["stack"]) if state == "Running" else frame(a["stack"]))
        acc[key] += b["t"] - a["t"]
        n[key] += 1
    for key, v in acc.most_common(25):
        print(f"{v / 1e3 / calls:8.1f} us/call {n[key] / calls:5.1f}x  {key[0]:9s} {key[1]}")


if __name__ == "__main__":
    main()
