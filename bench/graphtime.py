"""The per-call timing every peer script in bench/ uses: CUDA-graph replay.

graph_time(fn, flops, iters) warms fn up, captures a graph of GRAPH
back-to-back calls (20, or 2 for problems of 1e11 FLOPs and more) on a side
stream, replays it iters times (20 for the large problems) between CUDA
events, and returns the sorted per-call times in microseconds: each replay's
time divided by GRAPH. Python's launch overhead (about 20 us a call) stays
out, as it does for sdpabench's graph replay of our kernels.
"""
import torch


def graph_time(fn, flops, iters=200):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    graph_n = 20 if flops < 1e11 else 2
    n = iters if flops < 1e11 else 20
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(graph_n):
            fn()
    for _ in range(3):
        g.replay()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    ev[0].record()
    for i in range(n):
        g.replay()
        ev[i + 1].record()
    torch.cuda.synchronize()
    return sorted(ev[i].elapsed_time(ev[i + 1]) * 1e3 / graph_n for i in range(n))
