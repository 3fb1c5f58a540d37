# fp8gemm.py: the H200's FP8 (E4M3) and bf16 matrix-product throughput through
# PyTorch (cuBLASLt), timed as the peers' scripts in bench/ time: many calls
# captured in one CUDA graph, replayed between events, median of rounds.
# Context for issue #10's targets: what one dense product sustains on this
# chip. Usage: python3 fp8gemm.py
import statistics
import subprocess

import torch


def graph_time(fn, calls=50, rounds=7):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / calls)
    return statistics.median(times), min(times), max(times)


def main():
    print(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
    one = torch.ones((), device="cuda")
    for m, n, k in [(8192, 8192, 8192), (16384, 16384, 8192), (8192, 8192, 16384)]:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major B
        fp8 = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        ab = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        bb = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        bf = lambda: ab @ bb
        flop = 2.0 * m * n * k
        for name, fn in (("e4m3 scaled_mm", fp8), ("bf16 matmul", bf)):
            med, lo, hi = graph_time(fn)
            print(f"{name:15s} M{m} N{n} K{k}: {med*1e6:9.1f} us  {flop/med/1e12:7.1f} TFLOP/s (rounds {flop/hi/1e12:.1f}-{flop/lo/1e12:.1f})")
    print(subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu",
                          "--format=csv"], capture_output=True, text=True).stdout)


if __name__ == "__main__":
    main()
