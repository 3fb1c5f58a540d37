// testkernels.cu: kernels only backend/cuda's tests launch, built by gen.sh
// into testkernels_compute_80.ptx (any GPU the backend runs on: the driver
// JIT-compiles it) and embedded by the tests alone, not by the production
// modules. The sm_90a test kernels are testkernels_sm90a.cu.
#include "common.cuh"
#include "../../../wmma/include/fp8attn_fragments.h"

// fp8attn_check_layout (TestLayoutOnDevice) writes, for every lane and
// accumulator element, 1 where the formulas the kernels use (common.cuh's
// acc_row, acc_col) disagree with the generated, hardware-verified table,
// and also runs a WMMA load to confirm the table on the device at hand.
// bad must hold 32*8 ints.
extern "C" __global__ void fp8attn_check_layout(int* bad) {
  __shared__ float tile[256];
  int lane = threadIdx.x;
  for (int c = lane; c < 256; c += 32) tile[c] = (float)c;
  __syncwarp();
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
  wmma::load_matrix_sync(f, tile, 16, wmma::mem_row_major);
  for (int i = 0; i < 8; i++) {
    int r = FP8ATTN_WMMA_M16N16K16_ACC_F32[lane][i][0], c = FP8ATTN_WMMA_M16N16K16_ACC_F32[lane][i][1];
    int hw = (int)f.x[i];
    bad[lane * 8 + i] = (r != acc_row(lane, i)) + 2 * (c != acc_col(lane, i)) + 4 * (hw != 16 * r + c);
  }
}

// fp8attn_tanh (TestTanhApprox) writes y[i] = tanh_approx(x[i]) (common.cuh:
// the softcap's tanh in every kernel that has one) for every i < n.
extern "C" __global__ void fp8attn_tanh(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = tanh_approx(x[i]);
}
