"""Merges one run of scripts/gpu-prefill-peers.sh into markdown tables.

Reads, from the run's folder (every file optional: a missing one leaves its
column "n/a"):
  ours*.json           sdpabench -json: the public call, FP8 device tensors and
                       float32 device tensors with FP8 precision, per call in a
                       replayed graph (p50 over samples);
  peers.json           bench/hopper_peers.py: PyTorch SDPA fp16 on cuDNN, Triton FP8
                       (CUDA-graph replay, p50);
  cudnn-bhsd.log,      the cuDNN FP8 peer's output: RESULT lines (median of event
  cudnn-bshd.log       intervals between back-to-back calls; its CUDA-graph figure,
                       50 calls a graph, where it printed one);
  acc-ours.log         sdpabench -accuracy (ACCURACY lines);
  acc-cudnn.log        the cuDNN FP8 peer's --accuracy (ACCURACY lines);
  acc-peers.log        bench/peer_accuracy.py --cudnn-cases (ACCURACY lines);
  meta.txt             key: value lines (device, date, commit, command, versions).
Prints the tables. Usage: python3 bench/prefill_table.py RUN_DIR SHAPE...
(the shapes in sdpabench's spelling, in table order).
"""
import json
import os
import re
import sys


def parse_spec(spec):
    dims, *suffixes = spec.split(":")
    n = list(map(int, dims.split("x")))
    if len(n) == 5:
        n.insert(2, n[1])
    return n, "causal" in suffixes, "bshd" in suffixes


def key(spec):
    """The shape a spec names, whatever the order of its suffixes."""
    try:
        n, causal, bshd = parse_spec(spec)
    except ValueError:
        return spec
    return tuple(n), causal, bshd


def flops(spec):
    (b, h, _, sq, sk, d), causal, _ = parse_spec(spec)
    return 4 * b * h * sq * sk * d / (2 if causal else 1)


def describe(spec):
    (b, h, hkv, sq, sk, d), causal, bshd = parse_spec(spec)
    heads = f"H{h}" if h == hkv else f"Hq{h} Hkv{hkv}"
    seq = f"S{sq}" if sq == sk else f"Sq{sq} Sk{sk}"
    return f"B{b} {heads} {seq} D{d}" + (" causal" if causal else "") + (" BSHD" if bshd else "")


def read(run, name):
    path = os.path.join(run, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def load_json(run, name):
    text = read(run, name)
    try:
        return json.loads(text) if text else []
    except ValueError:
        return []


def cudnn_results(text, suffix):
    """spec -> (µs, how) from the peer's RESULT lines; suffix marks the layout."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"RESULT\s+(\S+)\s+median_us=\s*([\d.]+)", line)
        if not m:
            continue
        g = re.search(r"cudagraph50 per_call_us=([\d.]+)", line)
        out[key(m.group(1) + suffix)] = (float(g.group(1)), "graph") if g else (float(m.group(2)), "events")
    return out


def accuracy_lines(text):
    """case -> {key: value} from ACCURACY lines (the first word after the case
    names a peer's segment: 'triton-fp8 e_input=..' becomes triton-fp8.e_input)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"ACCURACY (\w+) (.*)", line)
        if not m:
            continue
        kv = {}
        for seg in m.group(2).split("|"):
            words = seg.split()
            prefix = ""
            if words and "=" not in words[0]:
                prefix, words = words[0] + ".", words[1:]
            for w in words:
                if "=" in w:
                    k, v = w.split("=", 1)
                    kv[prefix + k] = v
        out[m.group(1)] = kv
    return out


def cell(spec, us, note=""):
    if us is None:
        return "n/a"
    f = flops(spec)
    if f < 1e11:
        return f"{us:.2f} µs{note}"
    return f"{f / us / 1e6:.0f}{note}"


def main():
    run, shapes = sys.argv[1], sys.argv[2:]
    meta = {}
    for line in (read(run, "meta.txt") or "").splitlines():
        k, _, v = line.partition(":")
        meta[k.strip()] = v.strip()
    ours = {}
    for name in sorted(os.listdir(run)):
        if name.startswith("ours") and name.endswith(".json"):
            for r in load_json(run, name):
                ours[(key(r["shape"]), r.get("inputs", ""))] = r
    peers = {}
    for r in load_json(run, "peers.json"):
        label = r["backend"]
        peers[(key(r["shape"]), "torch-cudnn" if label.startswith("torch-cudnn") else label)] = r
    cudnn = cudnn_results(read(run, "cudnn-bhsd.log"), "")
    cudnn.update(cudnn_results(read(run, "cudnn-bshd.log"), ":bshd"))

    print(f"## GPU prefill, public API, beside the peers ({meta.get('device', '?')}, {meta.get('date', '?')}, "
          f"commit `{meta.get('commit', '?')}`)")
    print()
    print("Per call (µs) for the first two shapes, TFLOP/s for the others (4·B·Hq·Sq·Sk·D per call, causal counted")
    calls = sorted({r.get("calls_per_graph", 0) for r in ours.values()} - {0})
    print("as half); medians; all columns from one run on one GPU. Ours: `Device.Attention` captured with")
    print(f"`Device.Capture` ({', '.join(map(str, calls)) or '?'} calls a graph) and replayed. "
          "cuDNN FP8 **writes E4M3 output** (on Hopper it refuses fp16/bf16")
    print("output); ours writes float32, the fp16 and Triton peers fp16.")
    print()
    print("| shape | ours, FP8 device tensors | ours, float32 tensors, FP8 precision | cuDNN FP8 (E4M3 output) | cuDNN fp16 (PyTorch) | Triton FP8 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for spec in shapes:
        row = [describe(spec)]
        for inputs in ("fp8-tensors", "float32-tensors"):
            r = ours.get((key(spec), inputs))
            bad = " (check FAILED)" if r and r.get("tolerance") and not r.get("pass") else ""
            row.append(cell(spec, r and r.get("gpu_p50_us"), bad))
        c = cudnn.get(key(spec))
        row.append(cell(spec, c and c[0]))
        for label in ("torch-cudnn", "triton-fp8"):
            r = peers.get((key(spec), label))
            note = " (bf16)" if r and r["backend"].endswith("bf16") else ""
            row.append(cell(spec, r and r.get("gpu_p50_us"), note))
        print("| " + " | ".join(row) + " |")
    print()
    hows = {how for _, how in cudnn.values()}
    notes = [text for how, text in (("graph", "per call in a CUDA graph of 50 calls where it prints one (the small shapes)"),
                                    ("events", "median of event intervals between back-to-back calls elsewhere"))
             if how in hows]
    print("cuDNN FP8's time: " + ("; ".join(notes) or "not measured") + ". n/a: the peer refused the shape or did not run.")
    print()
    print(f"Command: `{meta.get('command', '?')}`")
    for k in ("gpu", "cudnn", "torch"):
        if k in meta:
            print(f"{k}: {meta[k]}")
    print()

    acc = {"ours": accuracy_lines(read(run, "acc-ours.log")), "cudnn": accuracy_lines(read(run, "acc-cudnn.log")),
           "peers": accuracy_lines(read(run, "acc-peers.log"))}
    print("### FP8 accuracy on the same cases")
    print()
    print("B1 H4 Sq256, Q and K N(0,1); relative L2 error against exact attention on the unquantized inputs, and that")
    print("over the error of input quantization alone (each side's own quantization: ours one scale per batch and")
    print("head, the peers one per tensor); each side draws its own inputs. cuDNN fp16 has no FP8 step: its error")
    print("and that of the exact result rounded to fp16.")
    print()
    print("| case | ours | cuDNN FP8 (E4M3 output) | Triton FP8 | cuDNN fp16 | exact rounded to fp16 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    cases = {"A": "Sk4096 D128, V N(0,1)", "B": "Sk4096 D128, V 2+N(0,1)", "C": "Sk1024 D64, V 2+N(0,1)",
             "D": "Sk4096 D128, V 2+N(0,1), causal top-left"}

    def ratio(kv, e, r):
        if not kv or e not in kv:
            return "n/a"
        return f"{float(kv[r]):.2f}x ({float(kv[e]):.2g})"

    for name, what in cases.items():
        o, c, p = acc["ours"].get(name), acc["cudnn"].get(name), acc["peers"].get(name)
        plain = lambda kv, k: f"{float(kv[k]):.2g}" if kv and k in kv else "n/a"
        print(f"| {name}: {what} | {ratio(o, 'e_ours', 'ratio')} | {ratio(c, 'e_cudnn', 'ratio')} | "
              f"{ratio(p, 'triton-fp8.e', 'triton-fp8.ratio')} | {plain(p, 'torch-cudnn-fp16.e')} | {plain(p, 'fp16-rounding.e')} |")


if __name__ == "__main__":
    main()
