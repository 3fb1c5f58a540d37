// common.cuh: what every kernel stage shares: the parameter block, the
// mask, the cp.async tile loop, FP8 decoding, the per-head offsets and score
// scale, the accumulator layout, the warp reductions, the online-softmax step
// and the empty-row epilogue. Included once by each module: attention.cu,
// attention_sm90a.cu (the Hopper kernel) and paged.cu (the paged cache).
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>
#include <stdint.h>
using namespace nvcuda;
#include <stddef.h>

#include "tiles.h"  // generated from internal/tiles: the geometry of every stage

// Params is mirrored field for field by backend/cuda/params.go; attention.cu
// exports its size and field offsets (fp8attn_params_layout), which the Go
// side checks when the module loads.
struct Params {
  const uint8_t *q, *k, *v;
  const float *q_scale, *k_scale, *v_scale;
  float *out, *lse;  // lse may be null
  long long q_batch_stride, q_head_stride, q_row_stride;
  long long kv_batch_stride, kv_head_stride, kv_row_stride;
  long long o_batch_stride, o_head_stride, o_row_stride;
  long long b, hq, hkv, sq, sk, d, group;
  long long mask;  // 0 none, 1 causal upper-left, 2 causal lower-right
  // Per (batch, query head): softmax scale · log2(e) · Q descale · K descale,
  // multiplied on the host in float64 (backend.Problem.ScoreFactor, the CPU
  // backend's factor too): no intermediate product can overflow, and the
  // host bounds the result.
  const float* score_scale;
  // The packed tiles of the Hopper kernel (stage 9): Q, K and V rearranged
  // on the device by its pack kernels into the swizzled layout its bulk
  // copies load (see hopper.cuh). Unused, and null, for stages 1-8.
  uint8_t *qi, *ki, *vi;
  // The attention variants (backend.Variants), which stages 9 and 10
  // compute (the other stages are given none): window, when positive,
  // bounds a row's keys from below (first_key; stage 10 reads it in its
  // window and softcap entry points only); softcap, when positive, is the
  // cap of the scores of their softcap entry points (the others ignore
  // it); sinks, when not null, holds one logit per query head, whose
  // e^sink joins the rows' denominators (not their LSEs).
  long long window;
  const float* sinks;
  float softcap, pad;
  // seq_k, when not null, holds each batch entry's key count (at most sk,
  // the key extent of K and V): stage 9 bounds each entry's key tiles and
  // rows' keys by its count (a batch of sequences of different lengths,
  // padded to sk; an entry's codes past its count must be finite through
  // the key tile that holds its last key), and the other stages read sk
  // only.
  // Stage 9 reads it before its programmatic dependency wait, so it must
  // be written before the kernel's predecessor on the stream starts.
  const int* seq_k;
};

// FP8ATTN_EXPORT_PARAMS_LAYOUT defines fp8attn_params_layout: the layout
// of Params as this compiler lays it out, its size, then the offset of
// every field in declaration order. The Go side compares it with its own
// struct when a module loads (and a CPU test with the PTX's copy). Each
// module (.cu file) expands it once.
#define FP8ATTN_PARAMS_OFF(f) (int)offsetof(Params, f)
#define FP8ATTN_EXPORT_PARAMS_LAYOUT                                                                          \
  extern "C" __device__ const int fp8attn_params_layout[] = {                                                 \
      (int)sizeof(Params),                    FP8ATTN_PARAMS_OFF(q),              FP8ATTN_PARAMS_OFF(k),      \
      FP8ATTN_PARAMS_OFF(v),                  FP8ATTN_PARAMS_OFF(q_scale),        FP8ATTN_PARAMS_OFF(k_scale), \
      FP8ATTN_PARAMS_OFF(v_scale),            FP8ATTN_PARAMS_OFF(out),            FP8ATTN_PARAMS_OFF(lse),    \
      FP8ATTN_PARAMS_OFF(q_batch_stride),     FP8ATTN_PARAMS_OFF(q_head_stride),  FP8ATTN_PARAMS_OFF(q_row_stride), \
      FP8ATTN_PARAMS_OFF(kv_batch_stride),    FP8ATTN_PARAMS_OFF(kv_head_stride), FP8ATTN_PARAMS_OFF(kv_row_stride), \
      FP8ATTN_PARAMS_OFF(o_batch_stride),     FP8ATTN_PARAMS_OFF(o_head_stride),  FP8ATTN_PARAMS_OFF(o_row_stride), \
      FP8ATTN_PARAMS_OFF(b),                  FP8ATTN_PARAMS_OFF(hq),             FP8ATTN_PARAMS_OFF(hkv),    \
      FP8ATTN_PARAMS_OFF(sq),                 FP8ATTN_PARAMS_OFF(sk),             FP8ATTN_PARAMS_OFF(d),      \
      FP8ATTN_PARAMS_OFF(group),              FP8ATTN_PARAMS_OFF(mask),           FP8ATTN_PARAMS_OFF(score_scale), \
      FP8ATTN_PARAMS_OFF(qi),                 FP8ATTN_PARAMS_OFF(ki),             FP8ATTN_PARAMS_OFF(vi),     \
      FP8ATTN_PARAMS_OFF(window),             FP8ATTN_PARAMS_OFF(sinks),          FP8ATTN_PARAMS_OFF(softcap), \
      FP8ATTN_PARAMS_OFF(pad),                FP8ATTN_PARAMS_OFF(seq_k)};

// The shared row of key k (0..31) of a 32-key tile as the fragments read
// it: within each 16 keys, the order 0,1,4,5,8,9,12,13, 2,3,6,7,10,11,14,15
// (the paged cache's layout, paged/append.cuh, is built around it; the
// Hopper kernel's paged form, hopper/paged.cuh, lays K's rows out in it so
// that P leaves the score accumulators in key order). key_of_row is its
// inverse.
__host__ __device__ __forceinline__ int key_row(int k) {
  return (k & 16) + 8 * ((k >> 1) & 1) + 2 * ((k & 15) >> 2) + (k & 1);
}
__host__ __device__ __forceinline__ int key_of_row(int r) {
  return (r & 16) | (r & 1) | (((r >> 3) & 1) << 1) | (((r >> 1) & 3) << 2);
}

#define NEG_INF (-__int_as_float(0x7f800000))
#define LN2 0.69314718055994530942f
#define LOG2E 1.44269504088896340736f

// Number of keys query row i sees, of a sequence of sk keys: keys [0, n).
__device__ __forceinline__ int visible_keys(const Params& p, int i, long long sk) {
  long long n = sk;
  if (p.mask == 1) n = i + 1;
  else if (p.mask == 2) n = i + 1 + sk - p.sq;
  return (int)max(0LL, min(n, sk));
}
__device__ __forceinline__ int visible_keys(const Params& p, int i) { return visible_keys(p, i, p.sk); }

// first_key is the first key query row i sees, of a sequence of sk keys:
// 0, or under a sliding window of W keys the window's lower edge p - W +
// 1, p the row's position in the key sequence (i, or i + sk - sq for the
// lower-right causal mask), clipped to 0 .. sk. Row i sees keys first_key
// .. visible_keys - 1.
__device__ __forceinline__ int first_key(const Params& p, int i, long long sk) {
  if (p.window <= 0) return 0;
  const long long pos = p.mask == 2 ? i + sk - p.sq : i;
  return (int)max(0LL, min(pos - p.window + 1, sk));
}
__device__ __forceinline__ int first_key(const Params& p, int i) { return first_key(p, i, p.sk); }

// visible_keys and first_key of a sequence of sq queries (a packed batch's
// sequence, whose count is not p.sq). These are the lines above with sq an
// argument; the forms above keep their own lines, since reading p.sq
// through an argument compiles to other code in every kernel (a select
// where the branch was).
__device__ __forceinline__ int visible_keys(const Params& p, int i, long long sq, long long sk) {
  long long n = sk;
  if (p.mask == 1) n = i + 1;
  else if (p.mask == 2) n = i + 1 + sk - sq;
  return (int)max(0LL, min(n, sk));
}
__device__ __forceinline__ int first_key(const Params& p, int i, long long sq, long long sk) {
  if (p.window <= 0) return 0;
  const long long pos = p.mask == 2 ? i + sk - sq : i, lower = pos - p.window + 1;
  return (int)max(0LL, min(lower, sk));
}

// cp.async of 16 bytes, zero-filling when the source row is past the end.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(n));
}
// cp.async of 16 bytes through L1 (cp.async.ca), whole. The paged decode's
// tiles use it: on the H200 the L1-bypassing form above asked L2 for 1.5x
// (K) and 2x (V) the sectors of those copies (lts__t_sectors_srcunit_tex_op_read,
// 235.6 MB for 134.5 MB of cache), this one for exactly the bytes, 4-6% less
// decode time (docs/design/paged-decode.md). The dense stages' copies are not
// measured with it.
__device__ __forceinline__ void cp_async16_l1(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// The cp.async tile loop every stage uses: issue the copies of key/value rows
// [j0, j0+BN) of one head into staging tiles whose rows are PITCH bytes
// apart, zero-filling rows >= sk. Thread t of NT copies the 16-byte chunks
// t, t+NT, ...: the whole block (t = threadIdx.x), or one warp of the
// split-KV stages (t = lane, NT = 32, rows padded against bank conflicts).
template <int BN, int D, int NT, int PITCH = D>
__device__ __forceinline__ void load_kv_tile(const Params& p, const uint8_t* kh, const uint8_t* vh, int j0,
                                             uint8_t* sk8, uint8_t* sv8, int t) {
  constexpr int CHUNKS = BN * D / 16;
#pragma unroll
  for (int c = t; c < CHUNKS; c += NT) {
    const int r = c / (D / 16), off = (c % (D / 16)) * 16, j = j0 + r;
    const bool ok = j < p.sk;
    const long long src = (long long)(ok ? j : 0) * p.kv_row_stride + off;
    cp_async16(sk8 + r * PITCH + off, kh + src, ok);
    cp_async16(sv8 + r * PITCH + off, vh + src, ok);
  }
}

// The f16 query load of the WMMA stages (2-4): a block's BM query rows from
// q into shared memory as f16, two codes per conversion, zeros past sq.
template <int BM, int D, int THREADS>
__device__ __forceinline__ void load_q_f16(const Params& p, const uint8_t* q, int i0, uint16_t* q16) {
  for (int c = threadIdx.x; c < BM * D / 2; c += THREADS) {
    int rr = (2 * c) / D, dd = (2 * c) % D;
    __nv_fp8x2_storage_t two = 0;
    if (i0 + rr < p.sq) two = *(const __nv_fp8x2_storage_t*)(q + (long long)(i0 + rr) * p.q_row_stride + dd);
    ((__half2_raw*)q16)[c] = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
  }
}

__device__ __forceinline__ float e4m3_to_float(uint8_t c) {
  __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
  return __half2float(__half(h));
}

// Head offsets for grid (query block, query head, batch), and the head's
// score scale (computed on the host) and V descale.
struct Head {
  const uint8_t *q, *k, *v;
  float* out;
  float* lse;
  float score_scale, out_scale;
};
__device__ __forceinline__ Head head_of(const Params& p) {
  int h = blockIdx.y, b = blockIdx.z;
  int kvh = h / (int)p.group;
  Head hd;
  hd.q = p.q + b * p.q_batch_stride + h * p.q_head_stride;
  hd.k = p.k + b * p.kv_batch_stride + kvh * p.kv_head_stride;
  hd.v = p.v + b * p.kv_batch_stride + kvh * p.kv_head_stride;
  hd.out = p.out + b * p.o_batch_stride + h * p.o_head_stride;
  hd.lse = p.lse ? p.lse + (b * p.hq + h) * p.sq : nullptr;
  hd.score_scale = p.score_scale[b * p.hq + h];
  hd.out_scale = p.v_scale[b * p.hkv + kvh];
  return hd;
}

// The accumulator layout (hardware-verified, see docs/WMMA.md): element i of
// lane l = 4g + t holds row g + 8*((i>>1)&1), column 2t + (i&1) + 8*(i>>2).
// fp8attn_check_layout (testkernels.cu) compares these with the generated
// header on device.
__device__ __forceinline__ int acc_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int acc_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 2); }

// Decode one staged FP8 tile (BN x D, K and V) to f16.
template <int BN, int D, int THREADS>
__device__ __forceinline__ void decode_tile(const uint8_t* k8, const uint8_t* v8, uint16_t* k16, uint16_t* v16) {
  for (int c = threadIdx.x; c < BN * D / 2; c += THREADS) {
    __half2_raw hk = __nv_cvt_fp8x2_to_halfraw2(*(const __nv_fp8x2_storage_t*)(k8 + 2 * c), __NV_E4M3);
    __half2_raw hv = __nv_cvt_fp8x2_to_halfraw2(*(const __nv_fp8x2_storage_t*)(v8 + 2 * c), __NV_E4M3);
    ((__half2_raw*)k16)[c] = hk;
    ((__half2_raw*)v16)[c] = hv;
  }
}

// Reductions over W adjacent lanes (W a power of two): the 4 lanes of a quad
// hold one accumulator row; stages 1-2 give a row TPR threads.
template <int W> __device__ __forceinline__ float group_max(float x) {
#pragma unroll
  for (int o = 1; o < W; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, o));
  return x;
}
template <int W> __device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int o = 1; o < W; o <<= 1) x += __shfl_xor_sync(0xffffffff, x, o);
  return x;
}

// One online-softmax step of a row whose running maximum is m (log2 domain)
// and whose new tile has maximum tile_max: m becomes the new maximum; alpha
// rescales the old sum and output; m_use is what the tile's scores subtract
// (0 while the row has seen only masked keys, so that exp2(-inf - 0) = 0).
struct OnlineStep {
  float alpha, m_use;
};
__device__ __forceinline__ OnlineStep online_step(float& m, float tile_max) {
  const float m_new = fmaxf(m, tile_max);
  OnlineStep s;
  s.m_use = m_new == NEG_INF ? 0.f : m_new;
  s.alpha = exp2f(m - s.m_use);
  m = m_new;
  return s;
}

// The epilogue of a row with running sum l and maximum m: a row that saw no
// key (l == 0) gets zeros, selected rather than multiplied so that a NaN the
// masked weights met in V stays out, and LSE -Inf; otherwise the output
// factor is the V descale over l and LSE is (m + log2 l)·ln 2. A NaN sum
// (NaN in Q or K) propagates.
__device__ __forceinline__ bool row_has_keys(float l) { return l > 0.f || l != l; }
__device__ __forceinline__ float row_lse(float m, float l) { return row_has_keys(l) ? (m + log2f(l)) * LN2 : NEG_INF; }

// ---------------------------------------------------------------------------
// P·V on FP8 tensor cores (the Hopper kernel, stage 9, and the Ada kernel,
// stage 10): both hand the softmax weights from the Q·Kᵀ accumulator to the
// e4m3 A operand (mma.m16n8k32, or wgmma's A from registers, the same
// per-warp layout) without shuffles, by reading V in a permuted key order.
// ---------------------------------------------------------------------------

// sigma: the key at position q (0-15) of a 16-key group of a V image. The
// accumulator gives thread t of a quad, in each 16-key group, keys 2t, 2t+1,
// 2t+8, 2t+9 of a row (two m16n8 tiles); the e4m3 A operand wants positions
// 4t..4t+3 (wmma.MMAE4M3A). Position 4t+i holds key sigma(4t+i) = 2t + (i&1)
// + 8(i>>1), so the thread's four weights, packed in that order, are exactly
// its A bytes (wmma.AccToE4M3A). P·V sums over keys, so permuting keys
// consistently in P and V changes nothing.
__host__ __device__ __forceinline__ int sigma(int q) { return 2 * (q >> 2) + (q & 1) + 8 * ((q >> 1) & 1); }

// ex2 is 2^x on the special-function unit, subnormal results flushed to
// zero (weights below 2^-126 of the row's largest are far under what E4M3
// keeps after the 2^8 scaling, and under float32's share of the row sum).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// tanh_approx is tanh(x) on the special-function unit (sm_75 and later),
// within a relative error of 2^-10.987 (PTX ISA): in a capped score
// c·tanh(s/c) an error of at most |s|·2^-10.98, under a hundredth of the
// 2^-4 relative step with which E4M3 rounds the weight it exponentiates.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
// pack4 converts four weights to E4M3 (round to nearest, finite values
// saturated, NaN kept) as one register, a in the lowest byte (sm_89+).
__device__ __forceinline__ uint32_t pack4(float a, float b, float c, float d) {
  uint16_t lo, hi;
  uint32_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;\n" : "=h"(lo) : "f"(a), "f"(b));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;\n" : "=h"(hi) : "f"(c), "f"(d));
  asm("mov.b32 %0, {%1, %2};\n" : "=r"(r) : "h"(lo), "h"(hi));
  return r;
}
#endif

// v_group is the 16 bytes of a V image that hold one column of the 16 keys
// from key0: key key0 + sigma(q) at byte q, code(key) for the keys below
// rows and zeros past them.
template <typename Code> __device__ __forceinline__ uint4 v_group(int key0, int rows, Code code) {
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int q = 0; q < 16; q++) {
    const int key = key0 + sigma(q);
    const uint32_t byte = key < rows ? code(key) : 0u;
    w[q / 4] |= byte << (8 * (q % 4));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// pack_v_image writes a V image into p.vi: per KV head, per tile of BN keys
// (the keys padded with zeros to whole tiles), D rows of BN bytes, row d
// holding column d of the tile's keys in sigma order within 16-key groups
// (rows d >= p.d zeros: a kernel runs the head dims below its own);
// place maps a byte offset inside a tile to where it is stored (a swizzle,
// or none). One thread per 16 image bytes; the threads of a warp take
// consecutive columns d, so that each of their 16 byte loads reads
// consecutive bytes of one V row.
template <int D, int BN, typename Place> __device__ __forceinline__ void pack_v_image(const Params& p, Place place) {
  constexpr int CH = BN / 16;
  const int sk = (int)p.sk, tiles = (sk + BN - 1) / BN;
  const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= p.b * p.hkv * tiles * CH * D) return;
  const int d = (int)(idx % D), c = (int)(idx / D % CH), tile = (int)(idx / D / CH % tiles),
            head = (int)(idx / D / CH / tiles);
  const int b = head / (int)p.hkv, h = head % (int)p.hkv;
  const uint8_t* src = p.v + b * p.kv_batch_stride + h * p.kv_head_stride + d;
  uint8_t* dst = p.vi + ((long long)head * tiles + tile) * (D * BN);
  *(uint4*)(dst + place(d * BN + 16 * c)) =
      d < p.d ? v_group(tile * BN + 16 * c, sk, [&](int key) { return src[(long long)key * p.kv_row_stride]; }) : make_uint4(0, 0, 0, 0);
}
