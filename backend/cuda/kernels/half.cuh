// half.cuh: the output of a call on host slices in float16, for the way
// down (backend/cuda/host.go): half the bytes over the bus. Included by
// attention.cu (every build: compute_89 and compute_80).
//
//   fp8attn_out_half  y[i] = float16(x[i] · factor), rounded to nearest
//                     (ties to even), for a power of two factor that the
//                     host chose so that every |x[i] · factor| <= 2^15
//                     (internal/half.Scale); the host multiplies each
//                     float16 by 1/factor, exactly, as it moves the output
//                     out of its page-locked ring (internal/half.Decode).
#pragma once

#include <cuda_fp16.h>

// HalfParams is mirrored by backend/cuda's halfParams (layout checked at
// load: fp8attn_half_params_layout).
struct HalfParams {
  const float* x;  // float32, n elements, 16-byte aligned
  __half* y;       // float16, n elements, 8-byte aligned
  long long n;
  float factor;  // a power of two
};

// out_half: a grid-stride loop, four elements a thread a step (one float4
// load, one 8-byte store); the last n mod 4 elements by the first block.
// The product by a power of two is exact wherever the float16 result is
// not zero, so y is float16(x·factor) rounded once.
__device__ __forceinline__ void out_half(const HalfParams& p) {
  const long long n4 = p.n / 4, step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += step) {
    const float4 v = ((const float4*)p.x)[i];
    __half2 lo = __floats2half2_rn(__fmul_rn(v.x, p.factor), __fmul_rn(v.y, p.factor));
    __half2 hi = __floats2half2_rn(__fmul_rn(v.z, p.factor), __fmul_rn(v.w, p.factor));
    uint2 w;
    w.x = *(const unsigned*)&lo;
    w.y = *(const unsigned*)&hi;
    ((uint2*)p.y)[i] = w;
  }
  if (blockIdx.x == 0) {
    for (long long i = 4 * n4 + threadIdx.x; i < p.n; i += blockDim.x) p.y[i] = __float2half_rn(__fmul_rn(p.x[i], p.factor));
  }
}
