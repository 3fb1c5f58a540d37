"""The peers of the paged FP8 decode kernel, timed as sdpabench and
BenchmarkPagedDecode time ours: per-call device time in CUDA-graph replay
(graphtime.py), p50 and p90 over the replays.

For each decode shape (B, Hq, Hkv, Sk, D; one new query token per sequence):
  torch-cudnn, torch-flash, torch-efficient   PyTorch SDPA on an fp16 cache,
      [B][Hkv][Sk][D], enable_gqa=True (query heads share their KV head's
      rows, as ours do);
  flash-kvcache   flash_attn_with_kvcache on an fp16 paged cache (page 256,
      shuffled block table), where the flash_attn package is installed.
Reports the cache bytes read per second (K and V once: 2·B·Hkv·Sk·D·2 bytes).
Writes JSON lines in sdpabench's format. Usage:
  python3 bench/decode_peers.py OUT.json [iters]
"""
import json
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from graphtime import graph_time

SHAPES = [(8, 32, 8, 8192, 128), (1, 32, 8, 32768, 128), (64, 32, 8, 2048, 128)]
out_path = sys.argv[1]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 200
torch.manual_seed(0)
results = []


def record(name, label, t, nbytes, flops):
    p50, p90 = t[len(t) // 2], t[len(t) * 9 // 10]
    results.append({"shape": name, "backend": label, "precision": "fp16-cache", "mask": "causal-lr",
                    "gpu_p50_us": p50, "gpu_p90_us": p90, "gflops": flops / p50 / 1e3, "iters": len(t),
                    "tb_per_s": nbytes / p50 / 1e6, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(f"{name:24s} {label:16s} device p50 {p50:8.2f} us  p90 {p90:8.2f} us  {nbytes / p50 / 1e6:5.2f} TB/s")


try:
    from flash_attn import flash_attn_with_kvcache
except Exception as e:  # not installed here
    flash_attn_with_kvcache = None
    print(f"flash_attn unavailable: {e}".splitlines()[0])

for b, hq, hkv, sk, d in SHAPES:
    name = f"B{b}-Hq{hq}-Hkv{hkv}-Sk{sk}-D{d}"
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.float16)
    nbytes = 2 * b * hkv * sk * d * 2
    flops = 4 * b * hq * sk * d
    for label, be in (("torch-cudnn", SDPBackend.CUDNN_ATTENTION), ("torch-flash", SDPBackend.FLASH_ATTENTION),
                      ("torch-efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            with sdpa_kernel([be]):
                t = graph_time(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), flops, iters)
        except Exception as e:  # a backend may refuse a shape
            print(f"{name:24s} {label:16s} unavailable: {e}".splitlines()[0])
            continue
        record(name, label, t, nbytes, flops)
    if flash_attn_with_kvcache is not None:
        try:
            page = 256
            pages = b * sk // page
            kc = k.transpose(1, 2).reshape(pages, page, hkv, d)  # [pages][page][Hkv][D]
            vc = v.transpose(1, 2).reshape(pages, page, hkv, d)
            perm = torch.randperm(pages, device="cuda")
            kp, vp = torch.empty_like(kc), torch.empty_like(vc)
            kp[perm], vp[perm] = kc, vc
            table = perm.view(b, sk // page).to(torch.int32)
            lens = torch.full((b,), sk, dtype=torch.int32, device="cuda")
            qf = q.transpose(1, 2).contiguous()  # [B][1][Hq][D]
            ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(1, 2)
            got = flash_attn_with_kvcache(qf, kp, vp, cache_seqlens=lens, block_table=table, causal=True)
            err = (got.float() - ref.float()).abs().max().item()
            if err > 1e-2:
                raise RuntimeError(f"flash_attn_with_kvcache disagrees with SDPA by {err}")
            t = graph_time(lambda: flash_attn_with_kvcache(qf, kp, vp, cache_seqlens=lens, block_table=table, causal=True),
                           flops, iters)
            record(name, "flash-kvcache", t, nbytes, flops)
        except Exception as e:
            print(f"{name:24s} flash-kvcache     unavailable: {e}".splitlines()[0])
with open(out_path, "w") as f:
    json.dump(results, f, indent=1)
print("torch", torch.__version__, torch.cuda.get_device_name())
