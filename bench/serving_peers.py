"""PyTorch's fp16 attention beside the paged FP8 cache's serving calls
(sdpa's BenchmarkKVCachePrefillGPU and BenchmarkKVCacheMixedGPU), timed as
those time ours: host-timed batches of back-to-back calls ended by a
synchronize after two calls to warm up, the per-call time over five
batches (their mean, as Go's benchmarks report it, and each batch's range).

chunk-N   B1 Hq32 Hkv8 D128, N new tokens (2048, 512, 128, 32) after 8192
          cached, lower-right causal: q [1][32][N][128] against K and V
          [1][8][8192+N][128], dense fp16 (no pages), SDPA with
          torch.nn.attention.bias.causal_lower_right, each backend that
          takes it (GQA through enable_gqa; where a backend refuses that,
          K and V expanded to the query heads beforehand, labelled so).
mixed     4 sequences with 512 new tokens (4096, 5461, 6826 and 8191 cached)
          and 60 with one (4096 + i*4095/59 cached), the same heads: PyTorch
          has no varlen SDPA, so two calls over caches padded to the
          longest sequence, each with its boolean mask (the chunks'
          lower-right causal rows over their own keys; each token its own
          keys); "chunks" and "tokens" are the two calls alone.
Writes JSON lines and prints one line a result. Usage:
  python3 bench/serving_peers.py OUT.json
"""
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

HQ, HKV, D = 32, 8, 128
BACKENDS = (("torch-cudnn", SDPBackend.CUDNN_ATTENTION), ("torch-flash", SDPBackend.FLASH_ATTENTION),
            ("torch-efficient", SDPBackend.EFFICIENT_ATTENTION))
out_path = sys.argv[1]
torch.manual_seed(0)
results = []


def host_time(fn, reps, batches=5):
    """The host time per call (µs) of batches of reps back-to-back calls,
    each ended by a synchronize: over all batches, and the fastest and the
    slowest batch's."""
    fn()
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / reps * 1e6)
    return statistics.mean(times), min(times), max(times)


def record(name, label, t):
    mean, lo, hi = t
    results.append({"shape": name, "backend": label, "precision": "fp16", "timer": "host, back to back",
                    "host_us": mean, "host_min_us": lo, "host_max_us": hi,
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(f"{name:22s} {label:28s} host {mean:9.2f} us/call  (batches {lo:.2f}-{hi:.2f})", flush=True)


def pick(be, q, k, v, mask):
    """A call of SDPA on backend be over q, k, v and mask, and the label's
    suffix: GQA through enable_gqa, or where be refuses that, over K and V
    expanded to the query heads (made here, outside the timing). Raises
    where be takes neither."""
    def gqa():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    try:
        with sdpa_kernel([be]):
            gqa()
        return gqa, ""
    except Exception:
        pass
    kx, vx = k.repeat_interleave(HQ // HKV, dim=1), v.repeat_interleave(HQ // HKV, dim=1)

    def full():
        return F.scaled_dot_product_attention(q, kx, vx, attn_mask=mask)
    with sdpa_kernel([be]):
        full()
    return full, " (K, V expanded)"


def first_line(e):
    return (f"{e}" or type(e).__name__).splitlines()[0]


def rand(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float16)


print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
for n in (2048, 512, 128, 32):
    s = 8192 + n
    q, k, v = rand(1, HQ, n, D), rand(1, HKV, s, D), rand(1, HKV, s, D)
    for label, be in BACKENDS:
        try:
            fn, suffix = pick(be, q, k, v, causal_lower_right(n, s))
            with sdpa_kernel([be]):
                record(f"chunk-{n}", label + suffix, host_time(fn, max(1, 20 * 2048 // n)))
        except Exception as e:  # a backend may refuse the mask or the shape
            print(f"{'chunk-' + str(n):22s} {label:28s} unavailable: {first_line(e)}", flush=True)
    del q, k, v

CHUNK, CHUNKS, TOKENS = 512, 4, 60
chunk_cached = [4096 + i * 4095 // (CHUNKS - 1) for i in range(CHUNKS)]
token_cached = [4096 + i * 4095 // (TOKENS - 1) for i in range(TOKENS)]
lc = max(chunk_cached) + CHUNK  # the chunks' keys, padded to the longest
lt = max(token_cached) + 1
qc, kc, vc = rand(CHUNKS, HQ, CHUNK, D), rand(CHUNKS, HKV, lc, D), rand(CHUNKS, HKV, lc, D)
qt, kt, vt = rand(TOKENS, HQ, 1, D), rand(TOKENS, HKV, lt, D), rand(TOKENS, HKV, lt, D)
keys = torch.arange(lc, device="cuda")
mc = torch.stack([keys[None, :] <= (c + torch.arange(CHUNK, device="cuda"))[:, None] for c in chunk_cached])[:, None]
mt = torch.stack([torch.arange(lt, device="cuda") <= c for c in token_cached])[:, None, None, :]
for label, be in BACKENDS:
    try:
        fc, sc = pick(be, qc, kc, vc, mc)
        ft, st = pick(be, qt, kt, vt, mt)
        with sdpa_kernel([be]):
            tc, tt = host_time(fc, 10), host_time(ft, 10)
            tm = host_time(lambda: (fc(), ft()), 10)
        record("mixed", label + (sc or st), tm)
        record("mixed-chunks", label + sc, tc)
        record("mixed-tokens", label + st, tt)
    except Exception as e:  # a backend may refuse the masks
        print(f"{'mixed':22s} {label:28s} unavailable: {first_line(e)}", flush=True)

with open(out_path, "w") as f:
    for r in results:
        f.write(json.dumps(r) + "\n")
