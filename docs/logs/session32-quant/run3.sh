#!/usr/bin/env bash
# Session 32, run 3: place.cu (where clusters of 4 land, and the loads of
# 16 working clusters of 4 chosen among 30).
set -u
export OUT
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/place docs/logs/session32-quant/place.cu && /tmp/place | tee "$OUT/place.txt"
