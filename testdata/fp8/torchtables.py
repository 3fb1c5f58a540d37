"""Run-length tables of PyTorch's float32 -> float8 casts over all 2^32 inputs.

Tensor.to(torch.float8_e4m3fn) and Tensor.to(torch.float8_e5m2), computed on
the GPU, with a strided sample recomputed on the CPU to show both agree, and
the float8 -> float32 decode tables. Usage: python3 torchtables.py OUTDIR
Output format: as fp8tables.cu (one "START CODE" hex line per run).
"""
import sys
import torch

out = sys.argv[1] if len(sys.argv) > 1 else "."
CHUNK = 1 << 28
for name, dt in (("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)):
    runs, last, cpu_diff = [], -1, 0
    for base in range(0, 1 << 32, CHUNK):
        u = torch.arange(base, base + CHUNK, dtype=torch.int64, device="cuda")
        u = torch.where(u >= 1 << 31, u - (1 << 32), u).to(torch.int32)
        x = u.view(torch.float32)
        c = x.to(dt).view(torch.uint8)
        # CPU cross-check on a strided sample.
        xs = x[::4093].cpu()
        cpu_diff += int((xs.to(dt).view(torch.uint8) != c[::4093].cpu()).sum())
        change = torch.ones_like(c, dtype=torch.bool)
        change[1:] = c[1:] != c[:-1]
        idx = torch.nonzero(change).flatten().cpu().tolist()
        vals = c[change].cpu().tolist()
        for i, v in zip(idx, vals):
            if v != last:
                runs.append((base + i, v))
                last = v
    with open(f"{out}/torch_{name}.rle", "w") as f:
        for s, v in runs:
            f.write(f"{s:08x} {v:02x}\n")
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt)
    dec = codes.to(torch.float32).view(torch.int32).tolist()
    with open(f"{out}/torch_decode_{name}.txt", "w") as f:
        for cde, bits in enumerate(dec):
            f.write(f"{cde:02x} {bits & 0xffffffff:08x}\n")
    print(f"torch {name}: {len(runs)} runs; CPU sample disagrees with GPU on {cpu_diff} inputs")
print("torch", torch.__version__)
