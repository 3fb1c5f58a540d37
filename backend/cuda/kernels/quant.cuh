// quant.cuh: E4M3 quantization on the device, bit for bit as the Go fp8
// package does it (fp8.QuantizeE4M3 per (batch, head), as sdpa.Quantize),
// and the score factors of a problem whose scales live on the device.
// Included by attention.cu (every build: compute_89 and compute_80).
//
//   fp8attn_quant_amax    one block per (batch, head): the largest finite
//                         |x| of the head (NaN and ±Inf ignored, as
//                         fp8.Amax), then fp8.ScaleForAmax: amax/448 (IEEE
//                         division), 1 for amax 0, the smallest subnormal
//                         where the quotient underflows.
//   fp8attn_quant_encode  code = fp8.ToE4M3(x/scale, NoSat): the Go
//                         converter's bit arithmetic (e4m3_nosat), so every
//                         float32 gives the Go code (TestQuantizeAllFloats).
//   fp8attn_score_factors per (batch, query head): backend.Problem's
//                         ScoreFactor (scale·Q descale·K descale in double)
//                         times log2(e), rounded once to float, as the host
//                         computes it for host-quantized inputs; a factor
//                         above MaxScoreFactor(D) sets *bad (the host's
//                         Validate error, reported at download).
#pragma once

// QuantParams is mirrored by backend/cuda's quantParams (layout checked at
// load: fp8attn_quant_params_layout).
struct QuantParams {
  float* src;        // float32 [B][H][S][D] in the layout the strides give (written only by the iota helper)
  uint8_t* codes;    // E4M3 codes, same layout
  float* scales;     // [B][H] dequantization scales
  long long batch_stride, head_stride, row_stride;  // elements, of src and codes
  int b, h, s, d;
  unsigned iota_base;  // fp8attn_quant_iota only: the first bit pattern
};

// ScoreParams is mirrored by scoreParams (fp8attn_score_params_layout).
struct ScoreParams {
  const float *q_scale, *k_scale;
  float* score_scale;  // [B][Hq]
  int* bad;            // set to 1 + (b·Hq + h) of a factor beyond the limit
  double scale, limit;
  int b, hq, hkv;
};

#define FP8ATTN_QUANT_PARAMS_OFF(f) (int)offsetof(QuantParams, f)
#define FP8ATTN_SCORE_PARAMS_OFF(f) (int)offsetof(ScoreParams, f)

// e4m3_nosat is the fp8 package's format.convert for E4M3 in NoSat mode:
// round to nearest even; NaN gives 0x7F (sign dropped), a magnitude from
// 464 up (±Inf included) gives 0x7F with its sign; results below half the
// smallest subnormal give ±0.
__device__ __forceinline__ uint8_t e4m3_nosat(float x) {
  const uint32_t bits = __float_as_uint(x);
  const uint32_t sign = (bits >> 24) & 0x80u, abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return 0x7F;                     // NaN
  if (abs >= 0x43E80001u) return (uint8_t)(0x7Fu | sign);  // from just above 464 (bits(464)+1)
  const int exp = (int)(abs >> 23) - 127;
  if (exp >= -6) {  // a normal E4M3 (rounding may carry into the exponent)
    const uint32_t r = abs + ((1u << 19) - 1) + ((abs >> 20) & 1u);
    return (uint8_t)(((r >> 20) - (120u << 3)) | sign);
  }
  const uint32_t shift = 20u + (uint32_t)(-6 - exp);  // to the subnormal quantum 2^-9
  if (shift > 25u || abs < 0x00800000u) return (uint8_t)sign;
  const uint32_t mant = (abs & 0x007FFFFFu) | 0x00800000u;
  const uint32_t r = (mant + ((1u << (shift - 1)) - 1) + ((mant >> shift) & 1u)) >> shift;
  return (uint8_t)(r | sign);
}

// The offset of element i (0 .. S·D-1) of head (b, h).
__device__ __forceinline__ long long quant_offset(const QuantParams& p, int b, int h, long long i) {
  return b * p.batch_stride + h * p.head_stride + (i / p.d) * p.row_stride + i % p.d;
}

// One block (256 threads) per (batch, head): grid (B·H).
__device__ __forceinline__ void quant_amax(const QuantParams& p) {
  __shared__ float warp_max[8];
  const int bh = blockIdx.x, b = bh / p.h, h = bh % p.h;
  const long long n = (long long)p.s * p.d;
  float m = 0.f;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    const float a = fabsf(p.src[quant_offset(p, b, h, i)]);
    if (a > m && a <= 3.40282347e38f) m = a;  // NaN and ±Inf fail both tests or the second
  }
  m = group_max<32>(m);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, warp_max[w]);
    float s = 1.f;
    if (m != 0.f) {
      s = __fdiv_rn(m, 448.f);
      if (s == 0.f) s = 1.40129846e-45f;  // math.SmallestNonzeroFloat32
    }
    p.scales[bh] = s;
  }
}

// Grid (blocks over S·D / 4, B·H), 256 threads, four elements a thread.
__device__ __forceinline__ void quant_encode(const QuantParams& p) {
  const int bh = blockIdx.y, b = bh / p.h, h = bh % p.h;
  const float s = p.scales[bh];
  const long long n = (long long)p.s * p.d;
  for (long long i = 4 * ((long long)blockIdx.x * blockDim.x + threadIdx.x); i < n; i += 4LL * gridDim.x * blockDim.x) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      if (i + j < n) {
        const long long o = quant_offset(p, b, h, i + j);
        p.codes[o] = e4m3_nosat(__fdiv_rn(p.src[o], s));
      }
    }
  }
}

// A test helper: src[i] = the float with bit pattern iota_base + i, for the
// S·D elements of one head (grid over them, 256 threads).
__device__ __forceinline__ void quant_iota(const QuantParams& p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)p.s * p.d) p.src[i] = __uint_as_float(p.iota_base + (unsigned)i);
}

// One thread per (batch, query head).
__device__ __forceinline__ void score_factors(const ScoreParams& p) {
  const int bh = blockIdx.x * blockDim.x + threadIdx.x;
  if (bh >= p.b * p.hq) return;
  const int b = bh / p.hq, h = bh % p.hq, group = p.hq / p.hkv;
  const double f = p.scale * (double)p.q_scale[bh] * (double)p.k_scale[b * p.hkv + h / group];
  if (fabs(f) > p.limit) atomicCAS(p.bad, 0, 1 + bh);
  p.score_scale[bh] = (float)(f * 1.4426950408889634);  // math.Log2E, rounded once
}
