"""PyTorch SDPA on the GPU beside sdpabench's numbers for our kernels.

Per-call device time (p50, p90) from CUDA-graph replay (graphtime.py), so
Python's launch overhead (about 20 us a call, far above the kernels) stays
out. Also host end-to-end time of one synchronized call. fp16 inputs, the
cuDNN and flash backends, the shapes sdpabench names.
Writes JSON in sdpabench's format, so `sdpabench compare torch.json ours.json`
prints the ratios. Usage: python3 bench/torch_sdpa.py OUT.json [iters]
"""
import json
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from graphtime import graph_time

SHAPES = {
    "small": (1, 2, 64, 64, 64),
    "mission": (2, 8, 256, 256, 64),
    "long": (1, 8, 2048, 2048, 64),
    "large": (4, 32, 4096, 4096, 128),
}
out_path = sys.argv[1]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 200
results = []
torch.manual_seed(0)
for name, (b, h, sq, sk, d) in SHAPES.items():
    q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.float16)
    k = torch.randn(b, h, sk, d, device="cuda", dtype=torch.float16)
    v = torch.randn(b, h, sk, d, device="cuda", dtype=torch.float16)
    flops = 4 * b * h * sq * sk * d
    for label, be in (("torch-cudnn-fp16", SDPBackend.CUDNN_ATTENTION), ("torch-flash-fp16", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel([be]):
                t = graph_time(lambda: F.scaled_dot_product_attention(q, k, v), flops, iters)
                n = len(t)
                # Host end-to-end, synchronizing each call.
                h_t = []
                for i in range(min(n, 50)):
                    t0 = time.perf_counter()
                    F.scaled_dot_product_attention(q, k, v)
                    torch.cuda.synchronize()
                    h_t.append((time.perf_counter() - t0) * 1e6)
                h_t.sort()
        except Exception as e:  # a backend may refuse a shape
            print(f"{name:8s} {label:18s} unavailable: {e}".splitlines()[0])
            continue
        p50, p90 = t[len(t) // 2], t[len(t) * 9 // 10]
        results.append({"shape": name, "backend": label, "precision": "fp8", "mask": "none",
                        "gpu_p50_us": p50, "gpu_p90_us": p90, "p50_us": h_t[len(h_t) // 2],
                        "p90_us": h_t[len(h_t) * 9 // 10], "gflops": flops / p50 / 1e3, "iters": n,
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        print(f"{name:8s} {label:18s} device p50 {p50:9.2f} us  p90 {p90:9.2f} us  {flops / p50 / 1e3:9.1f} GFLOP/s  host p50 {h_t[len(h_t)//2]:.1f} us")
with open(out_path, "w") as f:
    json.dump(results, f, indent=1)
print("torch", torch.__version__, torch.cuda.get_device_name())
