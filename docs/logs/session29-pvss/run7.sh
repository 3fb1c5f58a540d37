#!/usr/bin/env bash
# Session 29, run 7 (compile only): the v19 kernels with the consumers' setmaxnreg lowered from 240 to
# 168, 160 and 152; ptxas bounds the consumer code by it, so its spills say what a third consumer
# warpgroup (160 registers each beside a 24-register producer) would cost. Output: the one line per
# budget that the note in docs/PERF.md quotes.
cd backend/cuda/kernels && for r in 240 168 160 152; do sed "s/setmaxnreg.inc.sync.aligned.u32 240/setmaxnreg.inc.sync.aligned.u32 $r/" hopper.cuh > /tmp/h$r.cuh; sed "s#\"hopper.cuh\"#\"/tmp/h$r.cuh\"#" attention_sm90a.cu > /tmp/a$r.cu; (nvcc -O3 -std=c++17 -I. -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -o /tmp/a$r.cubin /tmp/a$r.cu > /tmp/b$r.log 2>&1; echo "maxnreg $r: $(for d in 64 96 128; do echo -n "d$d $(grep -A4 "fp8attn_stage9_d$d'" /tmp/b$r.log | grep -oE '[0-9]+ bytes spill stores' | tr '\n' ' ')"; done) $(grep -c error /tmp/b$r.log) errors") & done; wait
