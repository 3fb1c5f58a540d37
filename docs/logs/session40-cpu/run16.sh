# Run 16 (session 40): scripts/cpu-side-by-side.sh on commit 649d9b5's sdpabench (the CPU backend's
# default set on the Xeon is now amxfp8, whose FP32 runs the avx512 kernels): ours FP32 and FP8
# against PyTorch's CPU SDPA, 3 rounds, 1 thread and all 16.
set -u
OUT=$OUT/run16 ROUNDS=3 scripts/cpu-side-by-side.sh 2>&1 | tail -30
