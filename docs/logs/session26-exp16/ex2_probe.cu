// ex2_probe: what Hopper's special-function unit does with ex2.approx.f16x2,
// against ex2.approx.ftz.f32 (stage 9's exponential today). Session 26.
//   1. Every f16 input: ex2.approx.f16x2's result against 2^x in double,
//      relative error in units of 2^-11 (half an f16 ulp is 2^-11 relative at
//      most), over the inputs whose result is a normal f16; and what it does
//      below (subnormal results: kept or flushed).
//   2. Throughput in results per SM per clock: independent chains in every
//      thread, 8 blocks of 256 threads an SM, timed by events; and the same
//      for the softmax's pair step (two FFMA, one cvt.rn.f16x2.f32, one
//      ex2.approx.f16x2, one cvt.rn.satfinite.e4m3x2.f16x2) against today's
//      (two FFMA, two ex2.approx.ftz.f32, one cvt.rn.satfinite.e4m3x2.f32).
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a ex2_probe.cu
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void all_f16(uint32_t* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;  // one f16 pattern, both halves
  const uint32_t x = (i & 0xffffu) | ((i & 0xffffu) << 16);
  uint32_t y;
  asm("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
  out[i] = y;
}

constexpr int ITERS = 4096, CH = 8;

__global__ void rate_f32(float* sink, float seed) {
  float y[CH];
  for (int c = 0; c < CH; c++) y[c] = seed * (c + 1);
  for (int i = 0; i < ITERS; i++)
#pragma unroll
    for (int c = 0; c < CH; c++) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(y[c]));
  float a = 0;
  for (int c = 0; c < CH; c++) a += y[c];
  if (a == 1234.5f) *sink = a;
}

__global__ void rate_f16x2(float* sink, float seed) {
  uint32_t y[CH];
  for (int c = 0; c < CH; c++) y[c] = __float_as_uint(seed) + c;
  for (int i = 0; i < ITERS; i++)
#pragma unroll
    for (int c = 0; c < CH; c++) asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(y[c]));
  uint32_t a = 0;
  for (int c = 0; c < CH; c++) a ^= y[c];
  if (a == 0xdeadbeefu) *sink = 1;
}

// The softmax's work on two weights of one row, today: s·c + off in float32,
// two exponentials, one E4M3 pair.
__global__ void pair_f32(float* sink, float seed) {
  float s[CH], t[CH];
  uint32_t acc = 0;
  for (int c = 0; c < CH; c++) s[c] = seed * c, t[c] = seed * (c + 3);
  for (int i = 0; i < ITERS / 4; i++) {
#pragma unroll
    for (int c = 0; c < CH; c++) {
      float a = fmaf(s[c], 0.125f, -3.f), b = fmaf(t[c], 0.125f, -3.f), ea, eb;
      asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(ea) : "f"(a));
      asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(eb) : "f"(b));
      uint16_t p;
      asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(p) : "f"(ea), "f"(eb));
      acc += p;
      s[c] = ea, t[c] = eb;
    }
  }
  if (acc == 0xdeadbeefu) *sink = 1;
}

__global__ void pair_f16x2(float* sink, float seed) {
  float s[CH], t[CH];
  uint32_t acc = 0;
  for (int c = 0; c < CH; c++) s[c] = seed * c, t[c] = seed * (c + 3);
  for (int i = 0; i < ITERS / 4; i++) {
#pragma unroll
    for (int c = 0; c < CH; c++) {
      float a = fmaf(s[c], 0.125f, -3.f), b = fmaf(t[c], 0.125f, -3.f);
      uint32_t h, e;
      asm volatile("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(h) : "f"(a), "f"(b));
      asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(e) : "r"(h));
      uint16_t p;
      asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(p) : "r"(e));
      acc += p;
      s[c] = __half2float(__ushort_as_half((uint16_t)e)), t[c] = __half2float(__ushort_as_half((uint16_t)(e >> 16)));
    }
  }
  if (acc == 0xdeadbeefu) *sink = 1;
}

template <typename K>
void rate(const char* name, K k, int per_instr_results, double per_iter) {
  int sms, clk;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  float* sink;
  cudaMalloc(&sink, 4);
  const int blocks = 8 * sms, threads = 256;
  k<<<blocks, threads>>>(sink, -0.5f);
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  float best = 1e30f;
  for (int r = 0; r < 5; r++) {
    cudaEventRecord(a);
    k<<<blocks, threads>>>(sink, -0.5f);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (ms < best) best = ms;
  }
  const double results = (double)blocks * threads * CH * per_iter * per_instr_results;
  const double per_clk = results / (best * 1e-3) / sms / (clk * 1e3);
  printf("%-12s %8.3f ms  %7.2f results/SM/clk (at the %.0f MHz clock attribute)\n", name, best, per_clk, clk / 1e3);
  cudaFree(sink);
}

int main() {
  uint32_t* d;
  cudaMalloc(&d, 65536 * 4);
  all_f16<<<256, 256>>>(d);
  static uint32_t h[65536];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  double worst = 0, worst_x = 0;
  int halves_differ = 0, sub_kept = 0, sub_flushed = 0, nonfinite_bad = 0;
  double worst_by_band[6] = {0};  // |x| in [0,1), [1,2), [2,4), [4,8), [8,16), [16,25)
  for (uint32_t i = 0; i < 65536; i++) {
    const uint16_t lo = h[i] & 0xffff, hi = h[i] >> 16;
    if (lo != hi) halves_differ++;
    const double x = __half2float(__ushort_as_half((uint16_t)i));
    const double y = __half2float(__ushort_as_half(lo));
    const double want = std::exp2(x);
    if (std::isnan(x)) { if (!std::isnan(y)) nonfinite_bad++; continue; }
    if (std::isinf(x)) { if (y != (x > 0 ? INFINITY : 0.0)) nonfinite_bad++; continue; }
    if (want >= 65520.0) { if (!std::isinf(y)) nonfinite_bad++; continue; }
    if (want < 0x1p-14) {  // subnormal (or zero) in f16
      if (want >= 0x1p-24) { if (y == 0) sub_flushed++; else sub_kept++; }
      continue;
    }
    const double rel = std::fabs(y - want) / want / 0x1p-11;  // in half-ulps (2^-11)
    const double ax = std::fabs(x);
    const int band = ax < 1 ? 0 : ax < 2 ? 1 : ax < 4 ? 2 : ax < 8 ? 3 : ax < 16 ? 4 : 5;
    if (rel > worst_by_band[band]) worst_by_band[band] = rel;
    if (rel > worst) worst = rel, worst_x = x;
  }
  printf("ex2.approx.f16x2 over every f16 input with a normal result:\n");
  printf("  worst relative error %.3f x 2^-11 (at x = %g); halves differ on %d inputs; bad non-finite/overflow %d\n",
         worst, worst_x, halves_differ, nonfinite_bad);
  printf("  worst by |x| band [0,1) [1,2) [2,4) [4,8) [8,16) [16,25): %.3f %.3f %.3f %.3f %.3f %.3f (x 2^-11)\n",
         worst_by_band[0], worst_by_band[1], worst_by_band[2], worst_by_band[3], worst_by_band[4], worst_by_band[5]);
  printf("  subnormal results: %d kept, %d flushed to zero\n", sub_kept, sub_flushed);
  rate("ex2 f32", rate_f32, 1, ITERS);
  rate("ex2 f16x2", rate_f16x2, 2, ITERS);
  rate("pair f32", pair_f32, 2, ITERS / 4);
  rate("pair f16x2", pair_f16x2, 2, ITERS / 4);
  return 0;
}
