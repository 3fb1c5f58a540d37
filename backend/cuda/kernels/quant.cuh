// quant.cuh: E4M3 quantization on the device, bit for bit as the Go fp8
// package does it (fp8.QuantizeE4M3 per (batch, head), as sdpa.Quantize),
// and the score factors of a problem whose scales live on the device.
// Included by attention.cu (every build: compute_89 and compute_80).
//
//   fp8attn_quant_amax    up to three tensors (a call's Q, K, V) in one
//                         launch, every head split into chunks of rows, a
//                         block each: the largest finite |x| of the chunk
//                         (NaN and ±Inf ignored, as fp8.Amax), merged into
//                         the head's word of a device scratch by atomicMax.
//   fp8attn_quant_encode  the same grid: the head's fp8.ScaleForAmax
//                         (amax/448, IEEE division; 1 for amax 0; the
//                         smallest subnormal where the quotient underflows),
//                         then code = fp8.ToE4M3(x/scale, NoSat) with the Go
//                         converter's bit arithmetic (e4m3_nosat), so every
//                         float32 gives the Go code (TestQuantizeAllFloats);
//                         the head's last block writes its scale and clears
//                         the scratch for the next call.
//   (One block per head with a 64-bit division per element took 74 µs
//   for the mission shape's Q, K and V on the H200, 13x the attention.)
//   fp8attn_score_factors per (batch, query head): backend.Problem's
//                         ScoreFactor (scale·Q descale·K descale in double)
//                         times log2(e), rounded once to float, as the host
//                         computes it for host-quantized inputs; a factor
//                         above MaxScoreFactor(D) sets *bad (the host's
//                         Validate error, reported at download).
#pragma once

// QuantTensor is one float32 tensor to quantize; QuantParams up to three
// of them, quantized by one launch of each kernel (Q, K and V of a call).
// Both are mirrored by backend/cuda's quantTensor and quantParams (layout
// checked at load: fp8attn_quant_params_layout).
struct QuantTensor {
  float* src;      // float32 [B][H][S][D] in the layout the strides give
  uint8_t* codes;  // E4M3 codes, same layout
  float* scales;   // [B][H] dequantization scales
  long long batch_stride, head_stride, row_stride;  // elements, of src and codes
  int b, h, s, d;
};
struct QuantParams {
  QuantTensor t[3];
  // Device scratch, one word per head of all tensors (tensor 0's heads
  // first), zero between calls: the heads' amax bits (atomicMax of
  // non-negative floats' bits orders them as the floats), and how many of
  // a head's chunks are encoded (the last resets both).
  unsigned *amax, *done;
  int n;           // tensors (1-3)
  int rows;        // rows of a head per block (a chunk)
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
#define FP8ATTN_QUANT_TENSOR_OFF(f) (int)offsetof(QuantTensor, f)
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

// amax_add is fp8.Amax's step: m, or |x| where it is larger and finite
// (NaN and ±Inf ignored).
__device__ __forceinline__ float amax_add(float m, float x) {
  const float a = fabsf(x);
  return a > m && a <= 3.40282347e38f ? a : m;  // NaN and ±Inf fail the tests
}

// block_max reduces m over a block of blockDim.x threads (a multiple of 32)
// through warp_max (a word a warp); the result is thread 0's.
__device__ __forceinline__ float block_max(float m, float* warp_max) {
  m = group_max<32>(m);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, warp_max[w]);
  return m;
}

// encode4 is the codes of x / s, four values low byte first: fp8.ToE4M3 of
// the IEEE quotient, NoSat.
__device__ __forceinline__ uint32_t encode4(float4 x, float s) {
  return e4m3_nosat(__fdiv_rn(x.x, s)) | (uint32_t)e4m3_nosat(__fdiv_rn(x.y, s)) << 8 |
         (uint32_t)e4m3_nosat(__fdiv_rn(x.z, s)) << 16 | (uint32_t)e4m3_nosat(__fdiv_rn(x.w, s)) << 24;
}

// score_factor is backend.Problem.ScoreFactor (scale · Q descale · K descale
// in double) times log2(e), rounded once to float; a factor above limit
// sets *bad to 1 + bh (the first one flagged stays).
__device__ __forceinline__ float score_factor(double scale, double limit, float q_scale, float k_scale, int* bad, int bh) {
  const double f = scale * (double)q_scale * (double)k_scale;
  if (fabs(f) > limit) atomicCAS(bad, 0, 1 + bh);
  return (float)(f * 1.4426950408889634);  // math.Log2E
}

// The chunk a block works on: grid (chunks, heads of all tensors); block y
// picks the tensor and its head, block x a chunk of p.rows rows. g is the
// head's index in the scratch.
struct QuantChunk {
  const QuantTensor* t;
  int bh, g, r0, r1, chunks;
  bool ok;
};
__device__ __forceinline__ QuantChunk quant_chunk(const QuantParams& p) {
  QuantChunk c;
  int y = blockIdx.y, i = 0;
  while (i < p.n - 1 && y >= p.t[i].b * p.t[i].h) y -= p.t[i].b * p.t[i].h, i++;
  c.t = &p.t[i];
  c.bh = y;
  c.g = blockIdx.y;
  c.chunks = (c.t->s + p.rows - 1) / p.rows;
  c.r0 = blockIdx.x * p.rows;
  c.r1 = min(c.r0 + p.rows, c.t->s);
  c.ok = c.bh < c.t->b * c.t->h && c.r0 < c.t->s;
  return c;
}

// for_chunk calls f(offset, n) for the elements of the chunk's rows: VEC
// consecutive elements of one row per call (VEC = 4: float4 loads; the
// rows are 16-byte aligned when D % 4 == 0), the threads of the block
// spread over (row, column group) once, with no division per element.
template <int VEC, typename F> __device__ __forceinline__ void for_chunk(const QuantChunk& c, F f) {
  const QuantTensor& t = *c.t;
  const int b = c.bh / t.h, h = c.bh % t.h;
  const int groups = t.d / VEC;                                  // column groups a row
  const int tpr = min(groups, (int)blockDim.x);                  // threads a row
  const int rpp = blockDim.x / tpr;                               // rows a pass
  const int rt = threadIdx.x / tpr, ct = threadIdx.x % tpr;
  if (rt >= rpp) return;
  const long long head = b * t.batch_stride + h * t.head_stride;
  for (int r = c.r0 + rt; r < c.r1; r += rpp) {
    const long long row = head + r * t.row_stride;
    for (int g = ct; g < groups; g += tpr) f(row + g * VEC);
  }
}

// Phase 1: each block's largest finite |x| of its chunk, into the head's
// amax word (NaN and ±Inf ignored, as fp8.Amax).
template <int VEC> __device__ __forceinline__ void quant_amax(const QuantParams& p) {
  __shared__ float warp_max[32];
  const QuantChunk c = quant_chunk(p);
  if (!c.ok) return;
  float m = 0.f;
  for_chunk<VEC>(c, [&](long long o) {
#pragma unroll
    for (int j = 0; j < VEC; j++) m = amax_add(m, c.t->src[o + j]);
  });
  m = block_max(m, warp_max);
  if (threadIdx.x == 0 && m > 0.f) atomicMax(&p.amax[c.g], __float_as_uint(m));
}

// fp8.ScaleForAmax: amax/448 (IEEE division), 1 for amax 0, the smallest
// subnormal where the quotient underflows.
__device__ __forceinline__ float scale_for_amax(float m) {
  if (m == 0.f) return 1.f;
  const float s = __fdiv_rn(m, 448.f);
  return s == 0.f ? 1.40129846e-45f : s;
}

// Phase 2: encode the chunk with the head's scale; the last block of a
// head writes its scale and resets the head's scratch.
template <int VEC> __device__ __forceinline__ void quant_encode(const QuantParams& p) {
  const QuantChunk c = quant_chunk(p);
  if (!c.ok) return;
  const float s = scale_for_amax(__uint_as_float(p.amax[c.g]));
  for_chunk<VEC>(c, [&](long long o) {
    if constexpr (VEC == 4) {
      *reinterpret_cast<uint32_t*>(c.t->codes + o) = encode4(*reinterpret_cast<const float4*>(c.t->src + o), s);
    } else {
      c.t->codes[o] = e4m3_nosat(__fdiv_rn(c.t->src[o], s));
    }
  });
  __syncthreads();  // every thread has read the amax word
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&p.done[c.g], 1u) == (unsigned)c.chunks - 1) {  // the head's last chunk
      c.t->scales[c.bh] = s;
      p.amax[c.g] = 0u;
      p.done[c.g] = 0u;
    }
  }
}

// A test helper: tensor 0's src[i] = the float with bit pattern
// iota_base + i, for its first S·D elements (grid over them, 256 threads).
__device__ __forceinline__ void quant_iota(const QuantParams& p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)p.t[0].s * p.t[0].d) p.t[0].src[i] = __uint_as_float(p.iota_base + (unsigned)i);
}

// One thread per (batch, query head).
__device__ __forceinline__ void score_factors(const ScoreParams& p) {
  const int bh = blockIdx.x * blockDim.x + threadIdx.x;
  if (bh >= p.b * p.hq) return;
  const int b = bh / p.hq, h = bh % p.hq, group = p.hq / p.hkv;
  p.score_scale[bh] = score_factor(p.scale, p.limit, p.q_scale[bh], p.k_scale[b * p.hkv + h / group], p.bad, bh);
}

// ---------------------------------------------------------------------------
// The accuracy options on the device (sdpa's SmoothK and Hadamard), bit for
// bit as sdpa/transform.go computes them on the host: the same float64 and
// float32 operations in the same order, written with the _rn intrinsics so
// that the compiler cannot fuse a multiply and an add that Go keeps apart.
// ---------------------------------------------------------------------------

// TransformParams is mirrored by backend/cuda's transformParams
// (fp8attn_transform_params_layout).
struct TransformParams {
  float* x;              // float32 [B][H][S][D], the layout the strides give
  const float* q;        // CorrectLSE: the untransformed queries
  float* lse;            // CorrectLSE: [B][H][S]
  double* means;         // [B][Hkv][D]
  const float* signs;    // Rotate: [B][Hkv][D]
  long long batch_stride, head_stride, row_stride;  // elements, of x (and q)
  int b, h, s, d;
  int group;             // query heads per KV head (Rotate, CorrectLSE of Q); 1 for K
  int n;                 // Rotate: the Walsh-Hadamard block, a power of two dividing D
  float norm;            // Rotate: float32(1/sqrt(n)), rounded on the host
  float scale;           // CorrectLSE: the softmax scale
};

__device__ __forceinline__ long long transform_row(const TransformParams& p, int b, int h, int i) {
  return b * p.batch_stride + h * p.head_stride + (long long)i * p.row_stride;
}

// smoothK: grid (B·H), D threads (D <= 1024): thread c sums column c over
// the keys in key order in float64, divides by S, and subtracts the mean
// from the column, as sdpa.smoothK.
__device__ __forceinline__ void smooth_k(const TransformParams& p) {
  const int g = blockIdx.x, b = g / p.h, h = g % p.h, c = threadIdx.x;
  if (c >= p.d) return;
  double m = 0.0;
  for (int j = 0; j < p.s; j++) m = __dadd_rn(m, (double)p.x[transform_row(p, b, h, j) + c]);
  m = __ddiv_rn(m, (double)p.s);
  p.means[(long long)g * p.d + c] = m;
  for (int j = 0; j < p.s; j++) {
    const long long o = transform_row(p, b, h, j) + c;
    p.x[o] = (float)__dsub_rn((double)p.x[o], m);
  }
}

// rotate: grid (rows of all heads / 8), 8 rows a block of 256 threads in
// shared memory: each row times its KV head's signs, then the normalized
// fast Walsh-Hadamard transform of each block of n, as sdpa.rotateRows
// (every butterfly stage's operations are independent, so the order within
// a stage does not change a bit).
__device__ __forceinline__ void rotate(const TransformParams& p) {
  extern __shared__ float rows[];  // [8][D]
  const int per = p.s, total = p.b * p.h * per;
  for (int k = 0; k < 8; k++) {
    const int r = blockIdx.x * 8 + k;
    if (r >= total) break;
    const int bh = r / per, i = r % per, b = bh / p.h, h = bh % p.h;
    const float* sg = p.signs + (long long)(b * (p.h / p.group) + h / p.group) * p.d;
    const long long o = transform_row(p, b, h, i);
    for (int c = threadIdx.x; c < p.d; c += blockDim.x) rows[k * p.d + c] = __fmul_rn(p.x[o + c], sg[c]);
  }
  __syncthreads();
  const int pairs = 8 * p.d / 2;
  for (int hh = 1; hh < p.n; hh <<= 1) {
    for (int e = threadIdx.x; e < pairs; e += blockDim.x) {
      const int k = e / (p.d / 2), w = e % (p.d / 2);  // row k, butterfly w of the row
      const int blk = w / (p.n / 2), u = w % (p.n / 2);
      const int t = blk * p.n + (u / hh) * 2 * hh + u % hh;
      float* x = rows + k * p.d;
      const float a = x[t], c = x[t + hh];
      x[t] = __fadd_rn(a, c);
      x[t + hh] = __fsub_rn(a, c);
    }
    __syncthreads();
  }
  for (int k = 0; k < 8; k++) {
    const int r = blockIdx.x * 8 + k;
    if (r >= total) break;
    const int bh = r / per, i = r % per, b = bh / p.h, h = bh % p.h;
    const long long o = transform_row(p, b, h, i);
    for (int c = threadIdx.x; c < p.d; c += blockDim.x) p.x[o + c] = __fmul_rn(rows[k * p.d + c], p.norm);
  }
}

// correct_lse: one thread per query row, as sdpa.correctLSE: LSE += scale ·
// (q · mean) in float64, the dot in column order; rows with LSE -Inf stay.
__device__ __forceinline__ void correct_lse(const TransformParams& p) {
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= (long long)p.b * p.h * p.s) return;
  const int bh = (int)(r / p.s), i = (int)(r % p.s), b = bh / p.h, h = bh % p.h;
  float* l = p.lse + r;
  if (*l == NEG_INF) return;
  const double* m = p.means + (long long)(b * (p.h / p.group) + h / p.group) * p.d;
  const float* q = p.q + transform_row(p, b, h, i);
  double dot = 0.0;
  for (int c = 0; c < p.d; c++) dot = __dadd_rn(dot, __dmul_rn((double)q[c], m[c]));
  *l = (float)__dadd_rn((double)*l, __dmul_rn((double)p.scale, dot));
}
