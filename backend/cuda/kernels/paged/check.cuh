// paged/check.cuh: fp8attn_paged_check, the finiteness check of an append's
// new keys and values. Included by paged.cu only, in its order.
#pragma once

constexpr int CHECK_THREADS = 256;

// Sets *p.bad to 1 if any of the 2n elements is NaN or ±Inf (exponent all
// ones); leaves it alone otherwise. Grid-stride over the elements.
extern "C" __global__ void __launch_bounds__(CHECK_THREADS) fp8attn_paged_check(const CheckParams p) {
  pdl_entry();
  bool bad = false;
  const long long stride = (long long)gridDim.x * CHECK_THREADS;
  for (long long i = (long long)blockIdx.x * CHECK_THREADS + threadIdx.x; i < p.n; i += stride) {
    const unsigned a = __float_as_uint(p.k[i]) & 0x7f800000u, b = __float_as_uint(p.v[i]) & 0x7f800000u;
    bad |= a == 0x7f800000u || b == 0x7f800000u;
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *p.bad = 1;
}

// backend.PageScale: the smallest power of two s with amax <= s·64, at least
// 2^-149 (computed as the Go code does, in double).
__device__ __forceinline__ float page_scale(float amax) {
  int e;
  double f = frexp((double)amax / 64.0, &e);
  if (f == 0.5) e--;
  return (float)ldexp(1.0, max(e, -149));
}

// ---------------------------------------------------------------------------
