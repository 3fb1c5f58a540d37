"""The peers of the Hopper kernel (cuda/sm90), timed the way sdpabench times ours.

For each shape given (sdpabench shape strings: BxHxSqxSkxD or BxHqxHkvxSqxSkxD,
optional ":causal" and ":bshd"; the prefill table of docs/BENCHMARKS.md):
  torch-cudnn, torch-flash  PyTorch SDPA, fp16 inputs (bf16 where fp16 is
                            refused), cuDNN and FlashAttention backends;
  triton-fp8                a Triton flash-attention forward with E4M3 Q, K, V
                            (per-tensor scales folded into the score factor),
                            both GEMMs on FP8 tensor cores, P cast to E4M3;
                            V passed transposed (keys contiguous), as FP8 wgmma
                            wants it. Validated against PyTorch on the
                            dequantized inputs before it is timed.
Grouped heads (Hkv < Hq): PyTorch with enable_gqa=True, Triton reading each
KV head for its group of query heads. BSHD: Q, K, V and the output are
[B][S][H][D] in memory (strided views), V's transposed copy as in BHSD.
Per-call device time: CUDA-graph replay (graphtime.py, launch overhead out);
p50 and p90 over the replays. TFLOP/s = 4·B·H·Sq·Sk·D / t, causal counted as half.
Writes JSON in sdpabench's format. Usage:
  python3 bench/hopper_peers.py OUT.json [--peers=torch-cudnn,torch-flash,triton-fp8] [SHAPE ...]
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel

from graphtime import graph_time

DEFAULT_SHAPES = ["2x8x256x256x64", "1x8x2048x2048x64", "4x32x4096x4096x64", "4x32x4096x4096x96",
                  "4x32x4096x4096x128", "4x32x4096x4096x128:causal", "4x32x4096x4096x256",
                  "2x16x16384x16384x128"]


def _configs():
    out = []
    for bn in (64, 128):
        for stages in (2, 3, 4):
            out.append(triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=stages))
    return out


@triton.autotune(configs=_configs(), key=["HEAD_DIM", "N_K", "CAUSAL", "GROUP"])
@triton.jit
def _attn_fwd(Q, K, VT, O, qk_scale, N_Q, N_K, H,
              s_qb, s_qh, s_qm, s_kb, s_kh, s_kn, s_vb, s_vh, s_vd, s_ob, s_oh, s_om,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, GROUP: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qm + offs_d[None, :], mask=offs_m[:, None] < N_Q, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    k_base = K + b * s_kb + (h // GROUP) * s_kh
    v_base = VT + b * s_vb + (h // GROUP) * s_vh
    hi = N_K
    if CAUSAL:  # upper-left alignment, N_Q == N_K in the shapes timed
        hi = tl.minimum(N_K, (pid_m + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        keys = start_n + offs_n
        kt = tl.load(k_base + keys[None, :] * s_kn + offs_d[:, None], mask=keys[None, :] < N_K, other=0.0)
        qk = tl.dot(q, kt) * qk_scale
        valid = keys[None, :] < N_K
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= keys[None, :])
        qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + offs_d[None, :] * s_vd + keys[:, None], mask=keys[:, None] < N_K, other=0.0)
        acc = tl.dot(p.to(tl.float8e4nv), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(O + b * s_ob + h * s_oh + offs_m[:, None] * s_om + offs_d[None, :], acc.to(tl.float16), mask=offs_m[:, None] < N_Q)


def quantize(x, bshd=False):
    """E4M3 codes of x with one scale (amax/448), and the scale; bshd: x and
    the codes are [B][H][S][D] views of [B][S][H][D] memory."""
    if bshd:
        y, s = quantize(x.transpose(1, 2))
        return y.transpose(1, 2), s
    s = x.abs().amax().float().clamp(min=1e-12) / 448.0
    return (x.float() / s).to(torch.float8_e4m3fn), s


def triton_fp8(q8, k8, vt8, qk_scale, causal, out):
    B, H, S, D = q8.shape
    grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), B * H)
    _attn_fwd[grid](q8, k8, vt8, out, qk_scale, S, k8.shape[2], H,
                    q8.stride(0), q8.stride(1), q8.stride(2), k8.stride(0), k8.stride(1), k8.stride(2),
                    vt8.stride(0), vt8.stride(1), vt8.stride(2), out.stride(0), out.stride(1), out.stride(2),
                    HEAD_DIM=D, CAUSAL=causal, GROUP=H // k8.shape[1])
    return out


def parse_spec(spec):
    """sdpabench's spelling: BxHxSqxSkxD or BxHqxHkvxSqxSkxD, then :causal and :bshd."""
    dims, *suffixes = spec.split(":")
    n = list(map(int, dims.split("x")))
    if len(n) == 5:
        n.insert(2, n[1])
    if len(n) != 6 or any(f not in ("causal", "bshd", "bhsd", "none") for f in suffixes):
        raise ValueError(f"shape {spec!r}: want BxHxSqxSkxD or BxHqxHkvxSqxSkxD, then :causal, :bshd")
    return n, "causal" in suffixes, "bshd" in suffixes


def randn(b, h, s, d, bshd, dtype=torch.float32):
    """An N(0,1) [b][h][s][d] tensor, its memory [b][s][h][d] where bshd."""
    if bshd:
        return torch.randn(b, s, h, d, device="cuda", dtype=dtype).transpose(1, 2)
    return torch.randn(b, h, s, d, device="cuda", dtype=dtype)


def empty_like_layout(x, dtype):
    """An empty tensor of x's shape and memory order."""
    return torch.empty_like(x, dtype=dtype, memory_format=torch.preserve_format)


def main():
    out_path = sys.argv[1]
    peers = {"torch-cudnn", "torch-flash", "triton-fp8"}
    shapes = []
    for a in sys.argv[2:]:
        if a.startswith("--peers="):
            peers = set(a[len("--peers="):].split(","))
        else:
            shapes.append(a)
    shapes = shapes or DEFAULT_SHAPES
    torch.manual_seed(0)
    results = []
    for spec in shapes:
        (b, h, hkv, sq, sk, d), causal, bshd = parse_spec(spec)
        gqa = {"enable_gqa": True} if hkv != h else {}
        flops = 4 * b * h * sq * sk * d / (2 if causal else 1)
        q = randn(b, h, sq, d, bshd)
        k = randn(b, hkv, sk, d, bshd)
        v = randn(b, hkv, sk, d, bshd)
        runs = []
        for label, be in (("torch-cudnn", SDPBackend.CUDNN_ATTENTION), ("torch-flash", SDPBackend.FLASH_ATTENTION)):
            if label not in peers:
                continue
            for dt in (torch.float16, torch.bfloat16):
                # .to keeps the memory order (BSHD stays BSHD)
                qh, kh, vh = q.to(dt), k.to(dt), v.to(dt)
                try:
                    with sdpa_kernel([be]):
                        F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, **gqa)
                        t = graph_time(lambda: F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, **gqa), flops)
                    runs.append((f"{label}-{'fp16' if dt == torch.float16 else 'bf16'}", t, None))
                    break
                except Exception as e:  # a backend may refuse a shape or a dtype
                    err = str(e).splitlines()[0][:120]
            else:
                print(f"{spec:28s} {label:18s} unavailable: {err}")
        # Triton FP8: validate on the dequantized inputs, then time.
        if "triton-fp8" in peers:
            q8, sq8 = quantize(q, bshd)
            k8, sk8 = quantize(k, bshd)
            v8, sv8 = quantize(v, bshd)
            vt8 = v8.transpose(2, 3).contiguous()
            qk_scale = float(sq8 * sk8) / math.sqrt(d) * 1.4426950408889634
            o = empty_like_layout(q, torch.float16)
            try:
                triton_fp8(q8, k8, vt8, qk_scale, causal, o)
                torch.cuda.synchronize()
                ref = F.scaled_dot_product_attention(q8.float() * sq8, k8.float() * sk8, v8.float(), is_causal=causal, **gqa)
                rel = ((o.float() * 1 - ref).norm() / ref.norm()).item()
                status = "ok" if rel < 0.05 else "FAILED"
                t = graph_time(lambda: triton_fp8(q8, k8, vt8, qk_scale, causal, o), flops)
                runs.append(("triton-fp8", t, rel))
                print(f"{spec:28s} triton-fp8 validation: rel L2 {rel:.4f} vs PyTorch fp32 on the dequantized inputs ({status}); "
                      f"config {_attn_fwd.best_config}")
                if status != "ok":
                    runs.pop()
            except Exception as e:
                print(f"{spec:28s} triton-fp8         unavailable: {str(e).splitlines()[0][:160]}")
        for label, t, rel in runs:
            p50, p90 = t[len(t) // 2], t[len(t) * 9 // 10]
            results.append({"shape": spec, "backend": label, "precision": "fp8" if "fp8" in label else label.split("-")[-1],
                            "mask": "causal" if causal else "none", "layout": "bshd" if bshd else "bhsd",
                            "gpu_p50_us": p50, "gpu_p90_us": p90,
                            "gflops": flops / p50 / 1e3, "iters": len(t),
                            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            print(f"{spec:28s} {label:18s} device p50 {p50:9.2f} us  p90 {p90:9.2f} us  {flops / p50 / 1e6:7.1f} TFLOP/s")
        del q, k, v
        torch.cuda.empty_cache()
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)
    print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())


if __name__ == "__main__":
    main()
