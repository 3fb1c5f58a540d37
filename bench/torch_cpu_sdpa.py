"""PyTorch SDPA on the CPU, float32, beside sdpabench's numbers for our CPU backend.

For each thread count given (torch.set_num_threads) and each shape, times
back-to-back calls of F.scaled_dot_product_attention on contiguous
(B, H, S, D) float32 tensors and reports the median (p50) and p90 host time
per call and GFLOP/s = 4*B*H*Sq*Sk*D / p50, in sdpabench's JSON format.
Usage: python3 bench/torch_cpu_sdpa.py OUT.json THREADS[,THREADS...] SHAPE[,SHAPE...]
with SHAPE as BxHxSqxSkxD.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

out_path, threads, shapes = sys.argv[1], sys.argv[2], sys.argv[3]
results = []
torch.manual_seed(0)
for nt in (int(t) for t in threads.split(",")):
    torch.set_num_threads(nt)
    for shape in shapes.split(","):
        b, h, sq, sk, d = (int(x) for x in shape.split("x"))
        q = torch.randn(b, h, sq, d)
        k = torch.randn(b, h, sk, d)
        v = torch.randn(b, h, sk, d)
        flops = 4 * b * h * sq * sk * d
        for _ in range(10):
            F.scaled_dot_product_attention(q, k, v)
        t0 = time.perf_counter()
        F.scaled_dot_product_attention(q, k, v)
        one = time.perf_counter() - t0
        n = max(20, min(2000, int(1.0 / max(one, 1e-6))))
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v)
            ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort()
        p50, p90 = ts[n // 2], ts[n * 9 // 10]
        label = f"torch-cpu-fp32-t{nt}"
        results.append({"shape": shape, "backend": label, "precision": "fp32", "mask": "none",
                        "p50_us": p50, "p90_us": p90, "gflops": flops / p50 / 1e3, "iters": n,
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        print(f"{shape:18s} {label:18s} p50 {p50:10.1f} us  p90 {p90:10.1f} us  {flops / p50 / 1e3:8.1f} GFLOP/s ({n} iters)")
with open(out_path, "w") as f:
    json.dump(results, f, indent=1)
print("torch", torch.__version__, "cpu capability", torch.backends.cpu.get_cpu_capability(),
      "threads", threads, "interop", torch.get_num_interop_threads())
