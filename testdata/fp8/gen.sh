#!/usr/bin/env bash
# Regenerates the committed fp8 tables on a machine with an NVIDIA GPU (sm_89+),
# nvcc and PyTorch. Usage: testdata/fp8/gen.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
nvcc -O2 -arch=sm_90 -Xcompiler -fopenmp "$here/fp8tables.cu" -o /tmp/fp8tables -lgomp
/tmp/fp8tables "$out"
python3 "$here/torchtables.py" "$out"
nvcc --version | tail -1 > "$out/VERSIONS"
python3 -c 'import torch; print("torch", torch.__version__)' >> "$out/VERSIONS"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$out/VERSIONS"
