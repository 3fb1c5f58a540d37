#!/usr/bin/env bash
# Session 42, run 1: the H200's dense FP8 and bf16 matrix products through
# PyTorch (cuBLASLt), graph replay (fp8gemm.py). Run from the repository root.
cd docs/logs/session42-close && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv &&
  PYTHONUNBUFFERED=1 python3 fp8gemm.py 2>&1 | tee $OUT/fp8gemm.txt
