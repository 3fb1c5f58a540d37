"""The peers' accuracy on the inputs of our TestFP8PAccuracy (docs/ACCURACY.md's rule).

For each case (B1, Hq = Hkv = 4, Sq 256, the keys and head dim given), Q and K
N(0, 1), V either N(0, 1) or 2 + N(0, 1) (values of one sign, where a running
FP8 P·V accumulator and an unrounded normalizer lose the most):
  triton-fp8   hopper_peers.py's kernel (per-tensor E4M3 scales, P cast to
               E4M3, P·V in one running accumulator, rows divided by the
               float32 sum of the unrounded weights): its relative L2 error
               against float64 attention on the unquantized inputs, and that
               over the error of input quantization alone (float64 attention
               on its own per-tensor quantized inputs), the ratio our test
               bounds (1.3x on N(0, 1), 1.5x on values of one sign);
  torch-cudnn  PyTorch SDPA with fp16 inputs on cuDNN: its relative L2 error
               against the same float64 reference (no FP8 step to divide by).
Both write fp16 outputs (ours float32): the error of the exact result rounded
to fp16 is printed beside them.
With --cudnn-cases, the cases are instead those of the cuDNN FP8 peer's
--accuracy and of sdpabench -accuracy (A: Sk4096 D128 V N(0,1); B: same, V
2+N(0,1); C: Sk1024 D64, V 2+N(0,1); D: as B, causal top-left), one
"ACCURACY <case> ..." line each, for scripts/gpu-prefill-peers.sh.
Usage: python3 bench/peer_accuracy.py [--cudnn-cases] [SEED]
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from hopper_peers import quantize, triton_fp8

CASES = [(4096, 128), (1024, 64), (2048, 256), (1024, 128)]
# name, keys, head dim, shift of V, causal (top-left)
CUDNN_CASES = [("A", 4096, 128, 0.0, False), ("B", 4096, 128, 2.0, False), ("C", 1024, 64, 2.0, False),
               ("D", 4096, 128, 2.0, True)]


def exact(q, k, v, causal=False):
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:  # top-left: query i sees keys j <= i
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.double()


def rel(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def cudnn_cases(seed):
    """One ACCURACY line for each of the cuDNN FP8 peer's cases."""
    for name, sk, d, shift, causal in CUDNN_CASES:
        q = torch.randn(1, 4, 256, d, device="cuda")
        k = torch.randn(1, 4, sk, d, device="cuda")
        v = torch.randn(1, 4, sk, d, device="cuda") + shift
        ref = exact(q, k, v, causal)
        q8, sq8 = quantize(q)
        k8, sk8 = quantize(k)
        v8, sv8 = quantize(v)
        base = rel(exact(q8.float() * sq8, k8.float() * sk8, v8.float() * sv8, causal), ref)
        o = torch.empty(1, 4, 256, d, device="cuda", dtype=torch.float16)
        qk_scale = float(sq8 * sk8) / math.sqrt(d) * 1.4426950408889634
        t = c = float("nan")  # a peer that refuses the case: nan, and why
        try:
            triton_fp8(q8, k8, v8.transpose(2, 3).contiguous(), qk_scale, causal, o)
            torch.cuda.synchronize()
            t = rel(o.float() * sv8, ref)
        except Exception as e:
            print(f"case {name}: triton-fp8 unavailable: {str(e).splitlines()[0][:160]}")
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                c = rel(F.scaled_dot_product_attention(q.half(), k.half(), v.half(), is_causal=causal).float(), ref)
        except Exception as e:
            print(f"case {name}: torch-cudnn fp16 unavailable: {str(e).splitlines()[0][:160]}")
        print(f"ACCURACY {name} triton-fp8 e_input={base:.4e} e={t:.4e} ratio={t / base:.3f} | torch-cudnn-fp16 e={c:.4e} "
              f"| fp16-rounding e={rel(ref.half(), ref):.4e} | shape=1x4x256x{sk}x{d} causal={causal} V={shift:g}+N(0,1) seed={seed}")


def main():
    args = [a for a in sys.argv[1:] if a != "--cudnn-cases"]
    seed = int(args[0]) if args else 16
    torch.manual_seed(seed)
    print(f"seed {seed}; {torch.cuda.get_device_name()}, torch {torch.__version__}")
    if len(args) < len(sys.argv) - 1:
        cudnn_cases(seed)
        return
    for sk, d in CASES:
        for kind in ("N(0,1)", "V 2+N(0,1)"):
            q = torch.randn(1, 4, 256, d, device="cuda")
            k = torch.randn(1, 4, sk, d, device="cuda")
            v = torch.randn(1, 4, sk, d, device="cuda")
            if kind != "N(0,1)":
                v += 2
            ref = exact(q, k, v)
            q8, sq8 = quantize(q)
            k8, sk8 = quantize(k)
            v8, sv8 = quantize(v)
            base = rel(exact(q8.float() * sq8, k8.float() * sk8, v8.float() * sv8), ref)
            vt8 = v8.transpose(2, 3).contiguous()
            o = torch.empty(1, 4, 256, d, device="cuda", dtype=torch.float16)
            qk_scale = float(sq8 * sk8) / math.sqrt(d) * 1.4426950408889634
            triton_fp8(q8, k8, vt8, qk_scale, False, o)
            torch.cuda.synchronize()
            t = rel(o.float() * sv8, ref)
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                c = rel(F.scaled_dot_product_attention(q.half(), k.half(), v.half()).float(), ref)
            f16 = rel(ref.half(), ref)  # what an fp16 output costs by itself (Triton's and cuDNN's)
            print(f"B1 H4 Sq256 Sk{sk} D{d} {kind:10s}: triton-fp8 {t:.4g}, input quantization alone {base:.4g}, "
                  f"ratio {t / base:.3f}; torch-cudnn fp16 {c:.3g}; exact rounded to fp16 {f16:.3g}")


if __name__ == "__main__":
    main()
