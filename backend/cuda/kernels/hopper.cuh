// hopper.cuh: stage 9, the Hopper kernel (sm_90a), and the pack kernels that
// lay its inputs out on the device. Included by attention_sm90a.cu only.
//
// Design (FlashAttention-3's, reduced to what this library needs):
//
//   * Layout owned by the device copy. The pack kernels rewrite Q, K and V
//     once per upload into "images": tiles stored contiguously, each byte
//     already where the wgmma operand layout wants it in shared memory
//     (K-major, swizzled; wmma.KMajorOffset, verified on the H200). One
//     bulk copy (cp.async.bulk, the tensor-memory accelerator's 1-D mode)
//     then moves a whole tile into shared memory, completing on an mbarrier:
//     no tensor map, so nothing from the CUDA 12 headers the pinned
//     gorgonia.org/cu build lacks.
//       Q, K: rows of DK bytes (D padded with zero columns to 64 or a
//             multiple of 128), in blocks of R rows (R = 64 for Q: one
//             consumer warpgroup; R = BN for K), each block split into
//             panels of WK = min(DK, 128) bytes, each panel R x WK swizzled.
//       V:    transposed: per tile of BN keys, D rows (one per head-dim
//             column) of BN bytes, swizzled with rows of BN bytes, and the
//             keys of every 16-key group permuted by sigma (below), so that
//             P goes from the Q·Kᵀ accumulator registers to wgmma's A
//             registers with conversions only, no shuffles.
//   * Warp specialization: warpgroup 0 is the producer (one thread issues
//     the bulk copies into a RING-deep ring of K and V tiles; the others
//     give their registers away with setmaxnreg), warpgroups 1 and 2 are
//     consumers of 64 query rows each (setmaxnreg 240).
//   * Q·Kᵀ: wgmma m64nBNk32 e4m3, A (Q) and B (K) from shared memory.
//   * Online softmax on the accumulator registers (layout wmma.WGMMAAcc):
//     row max over a quad, exp2 in the log2 domain with the score factor
//     from the host, P scaled by 2^8 before its E4M3 cast so that its range
//     is used (P <= 1 becomes <= 256 < 448), the row sum in float32.
//   * P·V: wgmma m64nDk32 e4m3 with A (P) from registers, B (Vᵀ) from shared
//     memory, each tile into a zeroed accumulator added to O in float32
//     (FP8ATTN_S9_PROMOTE), in column parts where one accumulator of D/2
//     registers beside O would spill (FP8ATTN_S9_PARTS_D*); beside it P
//     times a block of ones (m64n8k32) sums the rounded weights the output
//     is normalized by (FP8ATTN_S9_LSUM).
//   * Overlap (v3): within a warpgroup, Q·K(t)ᵀ and P(t-1)·V(t-1) are
//     issued together and the softmax of tile t (and its packing into a
//     second set of P registers; at D 64 into the same set, after P·V,
//     FP8ATTN_S9_ONE_PA) runs while P·V is on the tensor cores.
//     Ping-pong between the consumer warpgroups (they take turns to issue
//     their GEMMs) at D 192 and 256 (FP8ATTN_S9_PINGPONG): at D 96 and 128
//     it measured slower. At D 64 they take turns to run their softmaxes
//     instead (FP8ATTN_S9_SOFTMAX_TURNS, v18).
//
// sigma (common.cuh): the accumulator gives thread t of a quad, in each 16-key group,
// keys 2t, 2t+1, 2t+8, 2t+9 of a row; wgmma's A registers want positions
// 4t..4t+3 (wmma.WGMMAE4M3A). The image's position 4t+i holds key
// sigma(4t+i) = 2t + (i&1) + 8(i>>1), so the thread's four keys, packed in
// that order, are exactly its A bytes. P·V sums over keys, so permuting
// keys consistently in P and V changes nothing.
#pragma once
#include "../../../wmma/include/fp8attn_wgmma.h"
#include "bulk.cuh"   // mbarriers, bulk copies
#include "pdl.cuh"    // programmatic dependent launch: every entry point keeps its contract
#include "profile.cuh"  // timelines (-DFP8ATTN_PROFILE builds only)
#include "quant.cuh"  // e4m3_nosat, scale_for_amax: quant_pack9's encode is quant.cuh's

// The schedule (ping-pong, softmax turns, one P set, P·V's column parts)
// is data: internal/tiles' HopperConfig, generated into tiles.h as
// HopperTiles<D>::PINGPONG, SOFTMAX_TURNS, ONE_PA and PV_PARTS.
// Promotion: each tile's P·V runs into a zeroed accumulator and is added
// to O in float32 (DeepSeek-V3's promotion, their §3.3.2), in column parts
// where the registers ask for it. The tensor cores truncate each k32 step's
// sum relative to its largest term (internal/fp8mma); accumulated across
// tiles in one running wgmma accumulator, every new product would be
// truncated relative to the whole row so far, and on values of one sign
// the losses add up: 7% at 4096 keys (docs/ACCURACY.md).
// The normalizer: each row is divided by the sum of the E4M3 weights the
// tensor cores multiplied, computed by them (P times a block of ones,
// wgmma m64n8k32, beside P·V), instead of the float32 sum of the unrounded
// weights: then the output is a weighted mean of V's rows and rounding P
// moves it by at most 2^-4 of V's range, not of its magnitude (values of
// one sign lost up to 1.6x the input-quantization error without it). The
// float32 sum still gives the LSE.

namespace hopper {

// loop_stamp is the tiled kernel's main-loop event (profile.cuh, kernel
// PROFILE_LOOP, SM cycles): lane 0 of each consumer warpgroup's first warp
// records step `slot` of each of its first 64 tiles t in row 64·wg + t: 0
// the step begins, 1 the previous P·V waited for, 2 folded (before its
// turn), 3 its turn, 4 Q·K(t)ᵀ and P(t-1)·V(t-1) issued, 5 Q·K(t)ᵀ waited
// for, 6 the softmax done, 7 P packed (and the later column parts issued).
// Warpgroup index 2 is the producer: 0 before its wait for tile t's ring
// slot, 1 tile t's copies issued. backend/cuda's TestStage9LoopTimeline
// reads them.
__device__ __forceinline__ void loop_stamp(bool cond, int wg, int t, int slot) {
  PROFILE_CYCLES(cond && t < 64, PROFILE_LOOP, 64 * wg + t, slot);
}

// Part<P> names a column part of P·V at compile time.
template <int P> struct Part {
  static constexpr int value = P;
};

// Turns<ON, B> is two consumer warpgroups taking turns on named barriers B
// (warpgroup 0's) and B + 1 (warpgroup 1's), 256 threads each: take waits
// for warpgroup cw's turn, pass hands the turn to the other. Nothing when
// !ON.
template <bool ON, int B> struct Turns {
  int cw;
  __device__ __forceinline__ void take() const {
    if constexpr (ON) asm volatile("bar.sync %0, 256;\n" ::"r"(B + cw) : "memory");
  }
  __device__ __forceinline__ void pass() const {
    if constexpr (ON) asm volatile("bar.arrive %0, 256;\n" ::"r"(B + 1 - cw) : "memory");
  }
};

// wgmma ordering.
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// wg_wait waits until at most N committed wgmma groups are pending.
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// fence_regs keeps the compiler from moving accesses of accumulator
// registers across the asynchronous wgmma that owns them.
template <int R> __device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R, int C> __device__ __forceinline__ void fence_regs(uint32_t (&d)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; i++)
#pragma unroll
    for (int j = 0; j < C; j++) asm volatile("" : "+r"(d[i][j])::"memory");
}

// desc is the wgmma shared-memory descriptor of a K-major operand whose
// rows are W bytes, swizzled (W = 64 or 128; the tile base aligned to 1024
// bytes): stride byte offset 8·W between 8-row groups, leading byte offset
// unused (one k32 step stays inside a swizzle row). wmma.WGMMADescriptor
// encodes the same, and testdata/wmma/wgmmaswizzle.cu verified it.
template <int W> __device__ __forceinline__ uint64_t desc(uint32_t addr) {
  static_assert(W == 64 || W == 128, "swizzle width");
  constexpr uint64_t mode = W == 128 ? 1 : 2;
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((uint64_t)(8 * W >> 4) << 32) | (mode << 62);
}

// swizzle is wmma.KMajorOffset for an offset o inside a tile of W-byte
// rows: the 16-byte chunk XORed with address bits 7 and up. It is its own
// inverse.
template <int W> __host__ __device__ __forceinline__ int swizzle(int o) { return o ^ (((o >> 7) & (W / 16 - 1)) << 4); }

template <int D> struct Geometry {
  using T = HopperTiles<D>;
  static constexpr int DK = T::DK, BM = T::BM, BN = T::BN, RING = T::RING;
  static constexpr int WK = DK < 128 ? DK : 128;  // Q and K panel width (swizzle row)
  static constexpr int WV = BN;                   // V image row width
  static constexpr int QB = 64 * DK;              // one consumer's Q block, bytes
  static constexpr int KT = BN * DK, VT = D * BN; // K and V tiles, bytes
  static_assert(T::THREADS == 384 && BM == 128, "one producer and two consumer warpgroups of 64 rows");
  // The one-tile form's blocks: one producer and one consumer warpgroup.
  static constexpr int ONE_BM = T::ONE_BM;
  static_assert(T::ONE_THREADS == 256 && ONE_BM == 64, "the one-tile form: one producer and one consumer warpgroup of 64 rows");
  // The quantizing one-tile form's cluster (quantize_one_tile): its
  // blocks' shares of the keys, ONE_BM each, make the one tile of 2·BN.
  static constexpr int ONE_CLUSTER = T::ONE_CLUSTER;
  static constexpr int ONES = 1024;               // E4M3 ones: B of the row sums (the normalizer)
  static_assert(T::SMEM >= BM * DK + RING * (KT + VT) + ONES + 8 * (1 + 3 * RING) + 1023, "shared memory budget");
};

// The image of one head's Q (R = 64) or K (R = BN) rows: byte (row, col)
// sits at (row / R)·R·DK + (col / WK)·R·WK + swizzle(row % R · WK + col % WK).
template <int D, int R> __device__ __forceinline__ long long qk_image_offset(int row, int col) {
  using G = Geometry<D>;
  return (long long)(row / R) * R * G::DK + (col / G::WK) * R * G::WK +
         swizzle<G::WK>((row % R) * G::WK + col % G::WK);
}

// negate_if flips the sign of the 16 E4M3 codes in v where neg (exact).
__device__ __forceinline__ uint4 negate_if(uint4 v, bool neg) {
  const uint32_t m = neg ? 0x80808080u : 0u;
  return make_uint4(v.x ^ m, v.y ^ m, v.z ^ m, v.w ^ m);
}

// pack_qk writes the Q (IS_Q) or K image of every head: one thread per 16
// bytes of the image, zeros past the rows and the head dimension.
template <int D, bool IS_Q> __device__ __forceinline__ void pack_qk(const Params& p) {
  using G = Geometry<D>;
  constexpr int R = IS_Q ? 64 : G::BN, PAD = IS_Q ? G::BM : G::BN, CH = G::DK / 16;
  const int heads = (int)(IS_Q ? p.b * p.hq : p.b * p.hkv), h_per_b = (int)(IS_Q ? p.hq : p.hkv);
  const int rows = (int)(IS_Q ? p.sq : p.sk), rows_p = (rows + PAD - 1) / PAD * PAD;
  const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)heads * rows_p * CH) return;
  const int c = (int)(idx % CH), row = (int)(idx / CH % rows_p), head = (int)(idx / CH / rows_p);
  const int b = head / h_per_b, h = head % h_per_b, col = 16 * c;
  uint4 v = make_uint4(0, 0, 0, 0);
  if (row < rows && col < D) {
    const uint8_t* src = IS_Q ? p.q + b * p.q_batch_stride + h * p.q_head_stride + row * p.q_row_stride
                              : p.k + b * p.kv_batch_stride + h * p.kv_head_stride + row * p.kv_row_stride;
    // A negative score factor (a negative softmax scale) is folded into Q:
    // flipping the sign bit of every code is exact, so that the kernel
    // works with a positive factor and can take row maxima on raw scores.
    v = negate_if(*(const uint4*)(src + col), IS_Q && p.score_scale[b * p.hq + h] < 0.f);
  }
  uint8_t* dst = (IS_Q ? p.qi : p.ki) + (long long)head * rows_p * G::DK;
  *(uint4*)(dst + qk_image_offset<D, R>(row, col)) = v;
}

// pack_v writes the V image (pack_v_image, common.cuh), swizzled with rows
// of BN bytes.
template <int D> __device__ __forceinline__ void pack_v(const Params& p) {
  using G = Geometry<D>;
  pack_v_image<D, G::BN>(p, [](int o) { return swizzle<G::BN>(o); });
}

// FusedQuantParams: stage 9's parameters, whose Q, K and V point at
// float32 inputs (in the codes' layout and element strides) instead of
// codes, for quant_pack9 and the fused attention entry (stage9 with FUSED:
// its score factor from the scales quant_pack9 wrote); the score-factor
// check as ScoreParams has it.
// Mirrored by backend/cuda's fusedQuantParams (fp8attn_fused_params_layout).
struct FusedQuantParams {
  Params p;
  int* bad;
  double scale, limit;
};

// quant_pack9's geometry, exported by the module as
// fp8attn_quantpack9_config = {threads, cluster, codes}, which the host
// launches it by: threads a block, blocks a head (a thread-block cluster),
// and the most codes a block encodes (its rows times D; the host gives it
// its chunk's in dynamic shared memory). Each thread holds its share of
// those values in registers between the amax and the encode
// (QUANT_PACK_VALS float4). The build options are for A/B runs: on the
// mission shape (48 heads of 256×64) two blocks of 512 a head took 8.97 µs
// with the attention in a graph, four of 256 9.80 (docs/PERF.md); fewer
// blocks leave the attention's next blocks SMs to start on.
constexpr int QUANT_PACK_THREADS = 512;
constexpr int QUANT_PACK_CLUSTER = 2;
constexpr int QUANT_PACK_CODES = (16 << 10);
constexpr int QUANT_PACK_VALS = QUANT_PACK_CODES / (4 * QUANT_PACK_THREADS);

// QP_STAMP(cond, kernel, slot) is a quantization event (profile.cuh, row 0,
// %globaltimer) with the SM in slot 7. Kernel PROFILE_QUANT, quant_pack9:
// 0 entry, 1 past pdl_wait, 2 its values loaded and their amax found, 3 the
// block's amax, 4 the cluster's exchanged, 5 the codes in shared memory, 6
// the images written. Kernel PROFILE_ATTENTION, the fused attention: 0
// entry, 1 past pdl_wait, 2 consumer 0 started, 3 its last tile done, 4 its
// rows written, 5 the producer's copies issued. The quantizing one-tile
// form (quantize_one_tile) records its quantization in PROFILE_QUANT's
// slots (6: its copies issued) and, in PROFILE_ATTENTION's slots 5, 0 and
// 6, its codes stored, the other blocks' K shares landed, and its softmax
// done. backend/cuda's TestQuantPackTimeline reads them.
#define QP_STAMP(cond, kernel, slot)                         \
  do {                                                       \
    PROFILE_TIME(cond, kernel, 0, slot);                     \
    PROFILE_VALUE(cond, kernel, 0, 7, profile::sm());        \
  } while (0)

// cluster_sync is barrier.cluster (arrive with release, wait with acquire):
// every thread of the cluster's blocks reaches it before any goes on, and
// their shared-memory writes before it are visible after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// cluster_arrive and cluster_wait are barrier.cluster's two halves, apart:
// quant_pack9 arrives at its entry and waits before its first access to
// another block's shared memory, which must not come before that block
// has started (it has arrived by then).
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

// cluster_store writes v at the shared-memory address of x in block rank of
// this cluster (distributed shared memory).
__device__ __forceinline__ void cluster_store(float* x, int rank, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(cluster_map(x, rank)), "f"(v) : "memory");
}

// warp_amax is the largest of the warp's non-negative m: redux.sync on
// the bits, which order non-negative floats.
__device__ __forceinline__ float warp_amax(float m) { return __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m))); }

// byte_column is byte e of w0, w1, w2 and w3, in that order, as one word:
// four keys' codes of one column of V, from words holding four columns of
// each key (the V image's transpose, by byte permutes).
__device__ __forceinline__ uint32_t byte_column(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int e) {
  const int sel = e | (e + 4) << 4;
  return __byte_perm(__byte_perm(w0, w1, sel), __byte_perm(w2, w3, sel), 0x5410);
}

// amax4 is amax_add over the four values of x.
__device__ __forceinline__ float amax4(float m, float4 x) {
  return amax_add(amax_add(amax_add(amax_add(m, x.x), x.y), x.z), x.w);
}

// top4 is the largest of t and the magnitudes' bits of x (at least
// 0x7F800000 where x holds a non-finite value).
__device__ __forceinline__ uint32_t top4(uint32_t t, float4 x) {
  return max(max(max(t, __float_as_uint(x.x) & 0x7FFFFFFFu), max(__float_as_uint(x.y) & 0x7FFFFFFFu, __float_as_uint(x.z) & 0x7FFFFFFFu)),
             __float_as_uint(x.w) & 0x7FFFFFFFu);
}

// Encoder is quant_pack9's encode: codes bit for bit encode4's
// (e4m3_nosat of the IEEE quotient x/s), without encode4's division and
// bit arithmetic where the scale allows (fast):
//   * the quotient from the correctly rounded reciprocal r = 1/s, q0 = x·r,
//     then one remainder step, q = q0 - (q0·s - x)·r (both FMAs): the IEEE
//     quotient when the remainder is exact, which holds for every |x| <= amax
//     once s >= 2^-80 (Markstein; the remainder, about 2^-24·|x|, stays normal
//     wherever the code depends on it), with x's sign (a -0 stays -0);
//   * the code from cvt.rn.satfinite (round to nearest even, as
//     e4m3_nosat; no finite quotient reaches its saturation, |x/s| being
//     at most 448 and a rounding step), NoSat's codes put back for NaN
//     (0x7F) and ±Inf (0x7F with the sign), which it would saturate.
// Below s = 2^-80 (heads whose amax is under 3.7e-22) it is encode4.
// TestFastEncodeAllFloats checks it against encode4 for every float
// |x| <= amax and every non-finite one, over a range of amax.
struct Encoder {
  float s, r;
  bool fast;
  __device__ __forceinline__ explicit Encoder(float scale) : s(scale), r(__frcp_rn(scale)), fast(scale >= 0x1p-80f) {}
  // quotient is x/s for a finite x (a non-finite one gives NaN).
  __device__ __forceinline__ float quotient(float x) const {
    const float q0 = __fmul_rn(x, r);
    // q0 - (q0·s - x)·r: the signs on the FMAs' operands, so that -0 keeps
    // its sign (q0 = -0, q0·s - x = +0, -(+0)·r + -0 = -0) without a
    // copysign (an instruction a value; session 32).
    return __fmaf_rn(-__fmaf_rn(q0, s, -x), r, q0);
  }
  // special is NoSat's code of a non-finite x in byte k of w.
  __device__ __forceinline__ static uint32_t special(uint32_t w, float x, int k) {
    if (fabsf(x) <= 3.40282347e38f) return w;
    const uint32_t code = x != x ? 0x7Fu : 0x7Fu | ((__float_as_uint(x) >> 24) & 0x80u);
    return (w & ~(0xFFu << (8 * k))) | code << (8 * k);
  }
  // finite4 is the fast path's codes of x, low byte first, where x's
  // values are finite.
  __device__ __forceinline__ uint32_t finite4(float4 x) const { return pack4(quotient(x.x), quotient(x.y), quotient(x.z), quotient(x.w)); }
  // fast4 is the fast path's codes of x, low byte first: the non-finite
  // values' codes put back on a branch that finite inputs never take.
  __device__ __forceinline__ uint32_t fast4(float4 x) const {
    const uint32_t w = finite4(x);
    if (top4(0u, x) < 0x7F800000u) return w;
    return special(special(special(special(w, x.x, 0), x.y, 1), x.z, 2), x.w, 3);
  }
  __device__ __forceinline__ uint32_t operator()(float4 x) const { return fast ? fast4(x) : encode4(x, s); }
};

// EncodeCheckParams is encode_check's (mirrored by backend/cuda's
// encodeCheckParams, fp8attn_encode_check_params_layout).
struct EncodeCheckParams {
  const float* amax;
  unsigned* result;
  int n;
};

// encode_check is TestFastEncodeAllFloats's kernel: for each of the n amax
// values, every float x with |x| <= amax or not finite (bit patterns
// grid-strided) through Encoder and through encode4 with the scale
// fp8.ScaleForAmax gives; result[2k] counts the x whose codes differ,
// result[2k+1] holds one such x's bits.
__device__ __forceinline__ void encode_check(const EncodeCheckParams& p) {
  const float* amax = p.amax;
  unsigned* result = p.result;
  const int n = p.n;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int k = 0; k < n; k++) {
    const float a = amax[k];
    const Encoder enc(scale_for_amax(a));
    unsigned bad = 0, which = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += 4 * stride) {
      float4 x;
      x.x = __uint_as_float((unsigned)i);
      x.y = __uint_as_float((unsigned)(i + stride));
      x.z = __uint_as_float((unsigned)(i + 2 * stride));
      x.w = __uint_as_float((unsigned)(i + 3 * stride));
      const uint32_t got = enc(x), want = encode4(x, enc.s);
      const float xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const bool in = !(fabsf(xs[j]) <= 3.40282347e38f) || fabsf(xs[j]) <= a;
        if (in && ((got >> (8 * j)) & 0xFFu) != ((want >> (8 * j)) & 0xFFu)) bad++, which = __float_as_uint(xs[j]);
      }
    }
    if (bad) {
      atomicAdd(&result[2 * k], bad);
      result[2 * k + 1] = which;
    }
  }
}

// quant_pack9 quantizes Q, K and V straight into stage 9's images in one
// launch. Grid (QUANT_PACK_CLUSTER, heads), one cluster a head: y takes a
// head of Q, then of K, then of V; block x a chunk of rows (a multiple of
// 16, so that no V key group straddles two). Each block loads its chunk
// into registers once and finds its amax (quant_amax's rule), the
// cluster's blocks exchange them through distributed shared memory (each
// block's amax stored into every block's parts, one cluster barrier; the
// head's amax: the largest), and each block encodes its values into shared
// memory as quant_encode does and writes their part of the head's image as
// pack_qk and pack_v_image do (the last block also the padding; a negative
// score factor folded into Q, its sign the softmax scale's as the descales
// are positive). Block 0 writes the head's scale. Codes, scales and images
// are bit for bit those of quant_amax, quant_encode and the pack kernels;
// the score factors are the fused attention entry's (stage9).
template <int D> __device__ __forceinline__ void quant_pack9(const FusedQuantParams& f) {
  using G = Geometry<D>;
  constexpr int NC = QUANT_PACK_CLUSTER, NT = QUANT_PACK_THREADS, NV = QUANT_PACK_VALS;
  extern __shared__ __align__(16) uint8_t codes[];  // the chunk's codes, row-major (the host sizes it)
  __shared__ float warp_max[NT / 32];
  __shared__ float parts[NC];  // the cluster's blocks' amax, stored by each
  const Params& p = f.p;
  const int nq = (int)(p.b * p.hq), nkv = (int)(p.b * p.hkv), tid = threadIdx.x, c = blockIdx.x;
  int head = blockIdx.y, kind = 0;  // 0: Q, 1: K, 2: V
  if (head >= nq + nkv) kind = 2, head -= nq + nkv;
  else if (head >= nq) kind = 1, head -= nq;
  const int hper = (int)(kind == 0 ? p.hq : p.hkv), b = head / hper, h = head % hper;
  const int rows = (int)(kind == 0 ? p.sq : p.sk);
  const int R = ((rows + NC - 1) / NC + 15) / 16 * 16;  // rows a chunk
  const int r0 = min(c * R, rows), r1 = min(r0 + R, rows), n = (r1 - r0) * D;
  const long long rs = kind == 0 ? p.q_row_stride : p.kv_row_stride;
  const float* src = (const float*)(kind == 0 ? p.q : kind == 1 ? p.k : p.v) +
                     b * (kind == 0 ? p.q_batch_stride : p.kv_batch_stride) +
                     h * (kind == 0 ? p.q_head_stride : p.kv_head_stride) + r0 * rs;
  QP_STAMP(tid == 0, 0, 1);

  // Thread tid holds elements 4(tid + j·NT) .. +3 of the chunk (row-major,
  // D % 4 == 0), j < NV: every load issued before the first is used.
  float4 x[NV];
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < NV; j++) {
    const int i = 4 * (tid + j * NT);
    if (i < n) x[j] = *(const float4*)(src + (i / D) * rs + i % D);
  }
#pragma unroll
  for (int j = 0; j < NV; j++) {
    if (4 * (tid + j * NT) < n) m = amax4(m, x[j]);
  }
  QP_STAMP(tid == 0 && m >= 0.f, 0, 2);  // (m: after the loads)
  // The block's amax: each warp's, then warp 0 over them (block_max's
  // result, by warp_amax).
  m = warp_amax(m);
  if (tid % 32 == 0) warp_max[tid / 32] = m;
  __syncthreads();
  if (tid < 32) {
    m = warp_amax(tid < NT / 32 ? warp_max[tid] : 0.f);
    QP_STAMP(tid == 0 && m >= 0.f, 0, 3);
    cluster_wait();  // every block of the cluster has started (arrived at its entry)
    if (tid < NC) cluster_store(&parts[c], tid, m);
  } else {
    cluster_wait();
  }
  cluster_sync();  // every block's amax is in every block's parts
  m = 0.f;
#pragma unroll
  for (int r = 0; r < NC; r++) m = fmaxf(m, parts[r]);
  QP_STAMP(tid == 0, 0, 4);
  const Encoder enc(scale_for_amax(m));
  const float s = enc.s;
  if (tid == 0 && c == 0) ((float*)(kind == 0 ? p.q_scale : kind == 1 ? p.k_scale : p.v_scale))[head] = s;
  const bool tail = c == NC - 1;
  // The codes into shared memory, then for Q and K pack_qk's image rows of
  // the chunk (the tail: up to the padded rows), for V pack_v_image's
  // 16-key groups of the chunk (the tail: up to whole tiles), swizzled as
  // pack_v has it: a thread takes four columns of a group, sixteen 4-byte
  // loads (a key's four columns each) and byte permutes into the four
  // columns' 16 bytes (v_group's bytes, which it loads one a code).
  if (enc.fast) {
#pragma unroll
    for (int j = 0; j < NV; j++) {
      const int i = 4 * (tid + j * NT);
      if (i < n) *(uint32_t*)(codes + i) = enc.fast4(x[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < NV; j++) {
      const int i = 4 * (tid + j * NT);
      if (i < n) *(uint32_t*)(codes + i) = encode4(x[j], s);
    }
  }
  __syncthreads();
  QP_STAMP(tid == 0, 0, 5);
  if (kind < 2) {
    constexpr int CH = G::DK / 16;
    const int pad = kind == 0 ? G::BM : G::BN, rows_p = (rows + pad - 1) / pad * pad;
    const int q0 = min(c * R, rows_p), q1 = tail ? rows_p : min(q0 + R, rows_p);
    const bool neg = kind == 0 && f.scale < 0.0;
    uint8_t* dst = (kind == 0 ? p.qi : p.ki) + (long long)head * rows_p * G::DK;
    for (int idx = tid; idx < (q1 - q0) * CH; idx += NT) {
      const int col = 16 * (idx % CH), row = q0 + idx / CH;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row < rows && col < D) v = negate_if(*(const uint4*)(codes + (row - r0) * D + col), neg);
      *(uint4*)(dst + (kind == 0 ? qk_image_offset<D, 64>(row, col) : qk_image_offset<D, G::BN>(row, col))) = v;
    }
  } else {
    constexpr int BN = G::BN, CH = BN / 16;
    const int tiles = (rows + BN - 1) / BN, g0 = min(c * R, tiles * BN) / 16;
    const int g1 = tail ? tiles * CH : min(c * R + R, tiles * BN) / 16;
    for (int idx = tid; idx < (g1 - g0) * (D / 4); idx += NT) {
      const int d = 4 * (idx % (D / 4)), g = g0 + idx / (D / 4), tile = g / CH, cc = g % CH;
      uint32_t w[16];  // w[q]: columns d..d+3 of the key at position q
#pragma unroll
      for (int q = 0; q < 16; q++) {
        const int key = 16 * g + sigma(q);
        w[q] = key < rows ? *(const uint32_t*)(codes + (key - r0) * D + d) : 0u;
      }
      uint8_t* dst = p.vi + ((long long)head * tiles + tile) * (D * BN);
#pragma unroll
      for (int e = 0; e < 4; e++) {  // column d + e: byte e of every w[q]
        const int sel = e;
        uint32_t o[4];
#pragma unroll
        for (int k = 0; k < 4; k++) o[k] = byte_column(w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3], sel);
        *(uint4*)(dst + swizzle<BN>((d + e) * BN + 16 * cc)) = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  }
  QP_STAMP(tid == 0, 0, 6);
}

// qk_col is the first column of float4 j of a Q or K row for thread tid of
// the quantizing form: 16j + 4(tid % 4), so that the four threads of a row
// take 64 contiguous bytes in each load instruction (whole 32-byte sectors;
// with 16(tid % 4) + 4j each instruction took half of every sector it
// touched: 0.05 µs of the mission call, session 32).
__device__ __forceinline__ int qk_col(int tid, int j) { return 16 * j + 4 * (tid % 4); }

// HeadScales are a query head's scale and its KV head's, as quant_pack9
// writes them (fp8.ScaleForAmax of each head's amax).
struct HeadScales {
  float q, k, v;
};

// QuantClusterShared is the quantizing form's static shared memory: the
// cluster's blocks' amax of Q and K (parts[rank]: Q, K and two words of
// padding for 16-byte stores) and of V (parts_v[rank]: V and padding),
// their mbarriers, and the block's warps' amax (warp_max[0] Q and [1] K of
// all eight warps, [2] V of the producer's four).
struct QuantClusterShared {
  float4 parts[4], parts_v[4];
  uint64_t amax_full, amax_full_v;
  float warp_max[3][8];
};
__device__ __forceinline__ QuantClusterShared& quant_cluster_shared() {
  __shared__ QuantClusterShared x;
  return x;
}

// cluster_send_tx stores v at x's address in block rank of this cluster
// and completes 16 bytes on that block's mbarrier at bar's address
// (st.async: the store and the transaction count in one message).
__device__ __forceinline__ void cluster_send_tx(float4* x, float4 v, uint64_t* bar, int rank) {
  const uint32_t rx = cluster_map(x, rank), rbar = cluster_map(bar, rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(rx),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)), "r"(__float_as_uint(v.w)),
               "r"(rbar)
               : "memory");
}

// producer_sync is a barrier of the producer warpgroup's 128 threads
// alone (named barrier 6; stage 9's turns take 1 to 4).
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 6, 128;\n" ::: "memory"); }

// OneTileSources are a thread's float32 sources in the quantizing form:
// float4 j of its Q row (q[j]) and of its key of K (k[j]), and, in the
// producer warpgroup, float4 j of its V keys (v[4u + j]: unit u, key
// sigma(4vt + j) of its group); 0 where the row or key is past sq or sk
// (the values are zeros).
struct OneTileSources {
  unsigned long long q[4], k[4], v[8];
};

// one_tile_v_unit gives, for thread tid < 128 of the producer and its unit
// u (0, 1), the V key group vg (16 keys), the four columns 4vc .. 4vc+3 and
// the quad vt (keys sigma(4vt .. 4vt+3) of the group) it quantizes.
struct OneTileVUnit {
  int vg, vc, vt;
};
__device__ __forceinline__ OneTileVUnit one_tile_v_unit(int tid, int u) { return {tid / 64 + 2 * u, tid / 4 % 16, tid % 4}; }

// one_tile_v_sources sets x.v: thread tid's V sources in block r of KV
// head kvh of batch b (tid < 128: the two units of one_tile_v_unit; 0
// elsewhere and past sk). Unit u's key sigma(4vt + j) is key 16vg + 2vt +
// sigma(j) with vg = tid/64 + 2u, so the eight keys are the first one
// plus 0, 1, 8, 9, 32, 33, 40 and 41: one address computed, the others
// offsets from it, selected without branches (session 32's form took a
// branch and a parameter read a key: docs/PERF.md, session 33).
template <int D>
__device__ __forceinline__ void one_tile_v_sources(const Params& p, int b, int kvh, int r, int tid, OneTileSources& x) {
  constexpr int R = Geometry<D>::ONE_BM;
  const OneTileVUnit u = one_tile_v_unit(tid, 0);
  const int k0 = R * r + 16 * u.vg + 2 * u.vt, sk = (int)p.sk;
  const long long rs = p.kv_row_stride * (long long)sizeof(float);
  const unsigned long long a0 =
      (unsigned long long)((const float*)p.v + b * p.kv_batch_stride + kvh * p.kv_head_stride + 4 * u.vc) + (unsigned long long)(k0 * rs);
  const bool producer = tid < 128;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    int dk = 32 * (i / 4) + sigma(i % 4);
    x.v[i] = producer & (k0 + dk < sk) ? a0 + (unsigned long long)(dk * rs) : 0ull;
    asm volatile("" : "+l"(x.v[i]));
  }
}

// one_tile_sources is thread tid's sources in block r (query rows i0 ..
// i0+63, keys 64r .. 64r+63) of a query head h of batch b, KV head kvh:
// Q and K, row tid/4 of the block's, columns qk_col(tid, j); V (tid <
// 128), one_tile_v_sources. Kernel parameters only: it runs before
// pdl_wait, under the previous call, so that the loads issue back to back
// once the wait returns (the empty asm keeps ptxas from sinking the
// arithmetic past it: 0.15 µs of the mission call, session 32).
template <int D>
__device__ __forceinline__ OneTileSources one_tile_sources(const Params& p, int b, int h, int kvh, int i0, int r, int tid) {
  constexpr int R = Geometry<D>::ONE_BM;
  const int row = tid / 4, qrow = i0 + row, key = R * r + row;
  const float* q = (const float*)p.q + b * p.q_batch_stride + h * p.q_head_stride;
  const float* k = (const float*)p.k + b * p.kv_batch_stride + kvh * p.kv_head_stride;
  OneTileSources x;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    x.q[j] = qrow < p.sq ? (unsigned long long)(q + qrow * p.q_row_stride + qk_col(tid, j)) : 0ull;
    x.k[j] = key < p.sk ? (unsigned long long)(k + key * p.kv_row_stride + qk_col(tid, j)) : 0ull;
    asm volatile("" : "+l"(x.q[j]), "+l"(x.k[j]));
  }
  one_tile_v_sources<D>(p, b, kvh, r, tid, x);
  return x;
}

// one_tile_amax4 is the quantizing form's amax4 (non-finite values not
// counted; mutants/s9-amax-counts-nonfinite.sed counts them).
__device__ __forceinline__ float one_tile_amax4(float m, float4 x) {
  return amax4(m, x);
}

// one_tile_load is the float4 at a (zeros where a is 0).
__device__ __forceinline__ float4 one_tile_load(unsigned long long a) {
  return a ? *(const float4*)a : make_float4(0.f, 0.f, 0.f, 0.f);
}

// quantize_one_tile is the quantizing one-tile form's first part
// (fp8attn_stage9qo_d64, stage9 with QC), run by all ONE_THREADS threads
// of block r of a cluster of ONE_CLUSTER (one query head), after pdl_wait:
//   * it loads float32 query rows i0 .. i0+63 and keys 64r .. 64r+63 of K
//     (zeros past sq and sk) into registers, eight float4 a thread from
//     the addresses src (one_tile_sources, computed before pdl_wait), and
//     the producer warpgroup, once those have arrived, the same keys of V
//     into xv (eight float4 a thread, for quantize_one_tile_v);
//   * it finds the amax of Q and K (amax_add, quant_pack9's rule); the
//     blocks' amax are exchanged through distributed shared memory (sent
//     into every block's parts, completing on its amax_full): the head's
//     amax, scale and Encoder, as quant_pack9 has them;
//   * it encodes its rows of Q into its own s_q (the Q image block,
//     negated where the softmax scale is negative) and its keys of K into
//     s_k at their image offsets (the tiled kernel's K image: the 64 keys
//     of block r are bytes 4096r .. +4095 of it);
//   * its K share is copied into the other blocks' s_k (bulk copies
//     between shared memories, on their k_full[0], which expects the other
//     blocks' bytes from the set-up).
// V takes the producer warpgroup alone, after this and beside the
// consumer's Q·Kᵀ and softmax (quantize_one_tile_v): P·V needs it only
// after them. The codes are bit for bit quant_pack9's (the same loads,
// amax, Encoder and sign), so the call is bit for bit Quantize then
// AttentionOn. Returns the Q and K scales (v is 0: one_tile_v_scale).
template <int D>
__device__ __forceinline__ HeadScales quantize_one_tile(const FusedQuantParams& f, const OneTileSources& src, int i0, uint8_t* s_q,
                                                        uint8_t* s_k, uint64_t* k_full, float4 (&xv)[8]) {
  using G = Geometry<D>;
  constexpr int NC = G::ONE_CLUSTER, R = G::ONE_BM, SHARE = R * G::DK, NW = HopperTiles<D>::ONE_THREADS / 32;
  static_assert(D == 64 && G::DK == D && G::WK == R && NC * R == 2 * G::BN && NC <= 4 && NW == 8,
                "the quantizing one-tile form: D 64, a block's keys one 64-byte row of V's sub-tile, 16 bytes of codes a thread");
  QuantClusterShared& qs = quant_cluster_shared();
  const Params& p = f.p;
  const int r = blockIdx.x, tid = threadIdx.x, sq = (int)p.sq;
  QP_STAMP(tid == 0, 0, 1);
  // Q and K: row `row` of the block's, float4 j at column qk_col(tid, j).
  const int row = tid / 4, qrow = i0 + row, key = R * r + row;
  float4 xq[4], xk[4];
#pragma unroll
  for (int j = 0; j < 4; j++) xq[j] = one_tile_load(src.q[j]), xk[j] = one_tile_load(src.k[j]);
  float m[2] = {0.f, 0.f};
  uint32_t top = 0;  // the largest magnitude's bits: non-finite values where >= 0x7F800000
#pragma unroll
  for (int j = 0; j < 4; j++) {
    m[0] = one_tile_amax4(m[0], xq[j]), m[1] = one_tile_amax4(m[1], xk[j]);
    top = top4(top4(top, xq[j]), xk[j]);
  }
  // top here, where the loads' wait hides its operations (ptxas would sink
  // them past the amax exchange, onto the path to the codes).
  asm volatile("" : "+r"(top));
  QP_STAMP(tid == 0 && m[0] >= 0.f, 0, 2);  // (m: after the loads)
  // The block's amax (quant_pack9's reduction), then every block's into
  // every block's parts.
#pragma unroll
  for (int a = 0; a < 2; a++) {
    m[a] = warp_amax(m[a]);
    if (tid % 32 == 0) qs.warp_max[a][tid / 32] = m[a];
  }
  __syncthreads();
  // V's loads once Q's and K's have arrived, so that they do not share the
  // SM's bandwidth with them (0.05 µs of the mission call, session 32).
  if (tid < 128) {
#pragma unroll
    for (int i = 0; i < 8; i++) xv[i] = one_tile_load(src.v[i]);
  }
  if (tid < 32) {
#pragma unroll
    for (int a = 0; a < 2; a++) m[a] = warp_amax(tid < NW ? qs.warp_max[a][tid] : 0.f);
    QP_STAMP(tid == 0, 0, 3);
    cluster_wait();  // every block of the cluster has started (arrived at the set-up)
    if (tid < NC) cluster_send_tx(&qs.parts[r], make_float4(m[0], m[1], 0.f, 0.f), &qs.amax_full, tid);
  } else {
    cluster_wait();
  }
  // Warp 0 has sent before any warp spins on the barrier: a spinning warp
  // must not keep warp 0 from its sends (compute-sanitizer's racecheck,
  // which schedules warps its own way, hung without this).
  __syncthreads();
  mbar_wait(&qs.amax_full, 0);  // every block's amax is in parts
  float am[2] = {0.f, 0.f};
#pragma unroll
  for (int c = 0; c < NC; c++) {
    const float4 pc = qs.parts[c];
    am[0] = fmaxf(am[0], pc.x), am[1] = fmaxf(am[1], pc.y);
  }
  QP_STAMP(tid == 0, 0, 4);
  const Encoder eq(scale_for_amax(am[0])), ek(scale_for_amax(am[1]));
  uint4 cq, ck;
  // Where the thread's values are finite and the scales take Encoder's
  // fast path, straight-line code (one branch a thread, not one a float4:
  // 0.7 µs of the mission call, docs/PERF.md).
  if (eq.fast && ek.fast && top < 0x7F800000u) {
    cq = make_uint4(eq.finite4(xq[0]), eq.finite4(xq[1]), eq.finite4(xq[2]), eq.finite4(xq[3]));
    ck = make_uint4(ek.finite4(xk[0]), ek.finite4(xk[1]), ek.finite4(xk[2]), ek.finite4(xk[3]));
  } else {
    cq = make_uint4(eq(xq[0]), eq(xq[1]), eq(xq[2]), eq(xq[3]));
    ck = make_uint4(ek(xk[0]), ek(xk[1]), ek(xk[2]), ek(xk[3]));
  }
  {  // word j: the codes of columns qk_col(j) .. +3
    const uint4 nq = qrow < sq ? negate_if(cq, f.scale < 0.0) : make_uint4(0, 0, 0, 0);
    const uint32_t wq[4] = {nq.x, nq.y, nq.z, nq.w}, wk[4] = {ck.x, ck.y, ck.z, ck.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      *(uint32_t*)(s_q + swizzle<G::WK>(row * G::WK + qk_col(tid, j))) = wq[j];
      *(uint32_t*)(s_k + qk_image_offset<D, G::BN>(key, qk_col(tid, j))) = wk[j];
    }
  }
  QP_STAMP(tid == 0, 1, 5);
  // The tensor cores and the copies read shared memory through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  QP_STAMP(tid == 0, 0, 5);
  // The K copies, from lanes j < NC - 1 of the consumer warpgroup's first
  // warp: this block's share to the (j + 1)-th block after it.
  const int j = tid - HopperTiles<D>::ONE_THREADS / 2;
  if (j >= 0 && j < NC - 1) {
    bulk_copy_peer(s_k + r * SHARE, s_k + r * SHARE, SHARE, k_full, (r + j + 1) % NC);
    QP_STAMP(j == 0, 0, 6);
  }
  return HeadScales{eq.s, ek.s, 0.f};
}

// quantize_one_tile_v is the quantizing form's V, run by the producer
// warpgroup (tid < 128) after quantize_one_tile, with the values it loaded
// (xv) and at most 96 registers a thread (the consumer holds the rest):
// the producer's amax of its V keys, the blocks' V amax exchanged as Q's
// and K's are (parts_v, amax_full_v), and its keys of V encoded into
// s_v's sub-tile r: D rows (one a head-dim column) of the 64 keys, 64-byte
// rows swizzled as Q and K are, keys permuted by sigma in each 16-key
// group as in the V image (a thread holds keys sigma(4t .. 4t+3) of a
// group for four columns, so byte permutes of its codes give word t of
// each column's 16 bytes); then the share is copied into the other
// blocks' s_v (on their v_full[0]), and this block's v_full[0] gets its
// second arrival (the consumer's P·V reads this share too). P·V takes
// V's sub-tiles with 64-byte descriptors, the same keys in the same k
// steps as the V image.
template <int D>
__device__ __forceinline__ void quantize_one_tile_v(const float4 (&xv)[8], uint8_t* s_v, uint64_t* v_full) {
  using G = Geometry<D>;
  constexpr int NC = G::ONE_CLUSTER, R = G::ONE_BM, SHARE = R * G::DK;
  QuantClusterShared& qs = quant_cluster_shared();
  const int r = blockIdx.x, tid = threadIdx.x;
  float m = 0.f;
  uint32_t top = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) m = one_tile_amax4(m, xv[i]), top = top4(top, xv[i]);
  m = warp_amax(m);
  if (tid % 32 == 0) qs.warp_max[2][tid / 32] = m;
  producer_sync();
  if (tid < 32) {
    m = warp_amax(tid < 4 ? qs.warp_max[2][tid] : 0.f);
    if (tid < NC) cluster_send_tx(&qs.parts_v[r], make_float4(m, 0.f, 0.f, 0.f), &qs.amax_full_v, tid);
  }
  producer_sync();  // (warp 0 has sent before any warp spins: as in quantize_one_tile)
  mbar_wait(&qs.amax_full_v, 0);
  float am = 0.f;
#pragma unroll
  for (int c = 0; c < NC; c++) am = fmaxf(am, qs.parts_v[c].x);
  const Encoder ev(scale_for_amax(am));
  uint32_t w[8];  // w[4u + j]: the codes of unit u's key sigma(4vt + j), its four columns
  if (ev.fast && top < 0x7F800000u) {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = ev.finite4(xv[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = ev(xv[i]);
  }
  uint8_t* sub = s_v + r * SHARE;
#pragma unroll
  for (int u = 0; u < 2; u++) {
    const OneTileVUnit vu = one_tile_v_unit(tid, u);
#pragma unroll
    for (int e = 0; e < 4; e++)  // column 4vc + e: byte e of the unit's w
      *(uint32_t*)(sub + swizzle<R>((4 * vu.vc + e) * R + 16 * vu.vg + 4 * vu.vt)) =
          byte_column(w[4 * u], w[4 * u + 1], w[4 * u + 2], w[4 * u + 3], e);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  producer_sync();
  if (tid < NC - 1) bulk_copy_peer(sub, sub, SHARE, v_full, (r + tid + 1) % NC);
  // The block's own share is in s_v: v_full's second arrival (after the
  // producer's barrier, so every producer thread's stores and proxy fence
  // come before it). Without it the consumer's P·V could read the sub-tile
  // before it is written: compute-sanitizer's racecheck, which schedules
  // warps its own way, found that (session 32, run 11).
  if (tid == NC - 1) mbar_arrive(v_full);
}

// one_tile_v_scale is the head's V scale in the quantizing form, as
// quantize_one_tile_v found it (the consumer's descale for the epilogue):
// every block's V amax, once they are all in parts_v.
template <int D>
__device__ __forceinline__ float one_tile_v_scale() {
  QuantClusterShared& qs = quant_cluster_shared();
  mbar_wait(&qs.amax_full_v, 0);
  float am = 0.f;
#pragma unroll
  for (int c = 0; c < Geometry<D>::ONE_CLUSTER; c++) am = fmaxf(am, qs.parts_v[c].x);
  return scale_for_amax(am);
}


// stage9 is the attention kernel. Grid (query blocks of ROWS rows, query
// heads, batch: internal/tiles' HopperConfig.Launch); causal masks run the
// blocks with the most keys first.
//
// ONE (D = 64, keys padded to exactly two tiles: HopperConfig.OneTile) is
// the one-tile form for short sequences. Its blocks are one producer and
// one consumer warpgroup of ONE_BM = 64 rows (256 threads), so that a
// call's exponentials spread over twice the SMs. Both K and V tiles are
// loaded at once (the images are the tiled kernel's: for DK = 64 two K
// tiles are one K-major block of 2·BN rows, and V's two tiles are taken as
// the two halves of P·V's k steps), Q·Kᵀ is one wgmma m64n256k32 per k
// step, and one softmax runs over all 2·BN keys, with no online rescale.
// Such a call is bound by each block's own work, not by the pipeline
// between tiles (docs/PERF.md, kernel changelog v9-v10).
//
// QC (with FUSED and ONE; HopperConfig.OneTileQuantizing) is the one-tile
// form quantizing its own float32 inputs: a cluster of ONE_CLUSTER blocks
// a query head (grid x), block r taking query rows 64r .. 64r+63 and
// sharing the quantization of K and V (quantize_one_tile). No producer
// copies: Q is encoded into s_q, and k_full[0] and v_full[0] complete when
// the other blocks' shares of K and V have landed. Two cluster barriers:
// every block started (before the amax exchange's remote stores, which
// complete on each block's amax_full), and every block's shares received
// (before a block exits, since its shares are read from its shared memory
// by the copies).
template <int D, bool FUSED = false, bool ONE = false, bool QC = false>
__device__ __forceinline__ void stage9(const Params& p, const FusedQuantParams* f = nullptr) {
  using G = Geometry<D>;
  constexpr int DK = G::DK, BM = G::BM, BN = G::BN, RING = G::RING, WK = G::WK, WV = G::WV;
  // SN: the keys of one score tile.
  constexpr int SN = ONE ? 2 * BN : BN;
  // ROWS: the query rows of a block (one Q image block of 64 in the
  // one-tile form; Q's image is in blocks of 64 rows, padded to BM).
  constexpr int ROWS = ONE ? G::ONE_BM : BM;
  static_assert(!ONE || (DK == WK && SN <= 256 && RING >= 2), "the one-tile form: one K panel, an n256 wgmma at most, two ring slots");
  static_assert(!QC || (FUSED && ONE), "the quantizing form is a fused one-tile form");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  uint8_t* s_q = smem;
  uint8_t* s_k = s_q + BM * DK;
  uint8_t* s_v = s_k + RING * G::KT;
  uint8_t* s_ones = s_v + RING * G::VT;  // 1024-aligned, as the swizzled descriptors want
  uint64_t* bars = (uint64_t*)(s_ones + G::ONES);
  uint64_t* q_full = bars;
  uint64_t* k_full = bars + 1;
  uint64_t* v_full = bars + 1 + RING;
  uint64_t* empty = bars + 1 + 2 * RING;

  // (QC: block x is also the cluster rank, which picks the block's keys.)
  const int qb = p.mask && !QC ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, kvh = h / (int)p.group;
  const int sq = (int)p.sq, sk = (int)p.sk, i0 = qb * ROWS;
  // The keys the block's last row sees bound the tiles it loads (QC: a
  // block past the query rows quantizes its keys only).
  const int ntiles = QC && i0 >= sq ? 0 : (visible_keys(p, min(i0 + ROWS, sq) - 1) + BN - 1) / BN;
  const long long sq_p = (sq + BM - 1) / BM * BM, sk_p = (sk + BN - 1) / BN * BN;

  QP_STAMP(FUSED && !QC && threadIdx.x == 0, 1, 0);
  unsigned qp_entry = 0;  // (a profile build's entry time, stored after pdl_wait)
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < RING; s++) {
      mbar_init(&k_full[s], 1);
      mbar_init(&v_full[s], QC && s == 0 ? 2 : 1);  // (QC: and the producer's own V share)
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
    }
    if constexpr (QC) {  // the other blocks' shares of K and V, every block's amax
      mbar_expect_tx(&k_full[0], (G::ONE_CLUSTER - 1) * G::ONE_BM * DK);
      mbar_expect_tx(&v_full[0], (G::ONE_CLUSTER - 1) * G::ONE_BM * D);
      QuantClusterShared& qs = quant_cluster_shared();
      mbar_init(&qs.amax_full, 1);
      mbar_expect_tx(&qs.amax_full, G::ONE_CLUSTER * sizeof(float4));
      mbar_init(&qs.amax_full_v, 1);
      mbar_expect_tx(&qs.amax_full_v, G::ONE_CLUSTER * sizeof(float4));
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (threadIdx.x < G::ONES / 4) {
    reinterpret_cast<uint32_t*>(s_ones)[threadIdx.x] = 0x38383838u;  // four E4M3 1.0
    // The tensor cores read shared memory through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();
  if constexpr (QC) cluster_arrive();  // waited for before the amax exchange's remote stores
  PROFILE_CLOCK(qp_entry);
  OneTileSources src{};  // (QC: its loads' addresses, from the parameters alone)
  if constexpr (QC) src = one_tile_sources<D>(p, b, h, kvh, i0, (int)blockIdx.x, (int)threadIdx.x);
  pdl_wait();  // before the first global access (pdl.cuh)
  QP_STAMP(FUSED && threadIdx.x == 0, 1, 1);
  PROFILE_VALUE(QC && threadIdx.x == 0, 0, 0, 0, qp_entry);
  (void)qp_entry;
  HeadScales qc{};
  float4 xv[8];  // (QC: the producer's V values, loaded by quantize_one_tile)
  if constexpr (QC) qc = quantize_one_tile<D>(*f, src, i0, s_q, s_k, k_full, xv);

  if (threadIdx.x < 128) {  // producer warpgroup
    if constexpr (QC) {
      // V, beside the consumer's Q·Kᵀ and softmax, in the 96 registers a
      // thread the consumer's 240 leave; then every block has its shares
      // (the second cluster barrier).
      asm volatile("setmaxnreg.dec.sync.aligned.u32 96;\n" ::: "memory");
      quantize_one_tile_v<D>(xv, s_v, v_full);
      cluster_arrive();
      cluster_wait();
      return;
    }
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0 && ntiles > 0) {
      const uint8_t* qimg = p.qi + ((long long)b * p.hq + h) * sq_p * DK + (long long)i0 * DK;
      const uint8_t* kimg = p.ki + ((long long)b * p.hkv + kvh) * sk_p * DK;
      const uint8_t* vimg = p.vi + ((long long)b * p.hkv + kvh) * sk_p * D;
      mbar_expect_tx(q_full, ROWS * DK);
      bulk_load(s_q, qimg, ROWS * DK, q_full);
      if constexpr (ONE) {  // both tiles into ring slots 0 and 1, on slot 0's barriers
        mbar_expect_tx(&k_full[0], 2 * G::KT);
        bulk_load(s_k, kimg, 2 * G::KT, &k_full[0]);
        mbar_expect_tx(&v_full[0], 2 * G::VT);
        bulk_load(s_v, vimg, 2 * G::VT, &v_full[0]);
      }
      for (int t = 0; !ONE && t < ntiles; t++) {
        const int s = t % RING;
        loop_stamp(true, 2, t, 0);
        if (t >= RING) mbar_wait(&empty[s], (t / RING - 1) & 1);
        mbar_expect_tx(&k_full[s], G::KT);
        bulk_load(s_k + s * G::KT, kimg + (long long)t * G::KT, G::KT, &k_full[s]);
        mbar_expect_tx(&v_full[s], G::VT);
        bulk_load(s_v + s * G::VT, vimg + (long long)t * G::VT, G::VT, &v_full[s]);
        loop_stamp(true, 2, t, 1);
      }
      QP_STAMP(FUSED, 1, 5);
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");

  // Consumer warpgroup cw: rows i0 + 64cw .. +63; this thread rows r0, r0+8.
  const int cw = threadIdx.x / 128 - 1, tid = threadIdx.x % 128;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const int wg_row = i0 + 64 * cw, r0 = wg_row + 16 * warp + g;
  const int vis0 = visible_keys(p, r0), vis1 = visible_keys(p, r0 + 8);
  const int vis_min = visible_keys(p, min(wg_row, sq - 1));
  // The score factor, positive (the pack negated Q where it is not) and
  // at least the smallest normal float, so that -Inf·c stays -Inf. FUSED
  // (inputs quantized by quant_pack9 just before): score_factors' value
  // from the scales it wrote, a factor beyond the limit flagged in f->bad.
  float c;
  if constexpr (QC) {
    c = score_factor(f->scale, f->limit, qc.q, qc.k, f->bad, b * (int)p.hq + h);
  } else if constexpr (FUSED) {
    const int bh = b * (int)p.hq + h;
    c = score_factor(f->scale, f->limit, p.q_scale[bh], p.k_scale[b * p.hkv + kvh], f->bad, bh);
  } else {
    c = p.score_scale[b * p.hq + h];
  }
  c = fmaxf(fabsf(c), 1.17549435e-38f);
  // V's descale, for the epilogue: loaded here, beside the tiles' trip, not
  // after the last tile (a dependent global load of 0.5 µs there).
  // (QC: V's scale is known once the producer's V exchange is done, and is
  // taken in the epilogue.)
  float vs = QC ? 0.f : p.v_scale[b * p.hkv + kvh];
  QP_STAMP(FUSED && threadIdx.x == 128, 1, 2);
  const uint32_t q_addr = smem_u32(s_q + cw * G::QB);

  // Promotion, the normalizer and the column parts: see above. P·V runs
  // in NP column parts of DP = D/NP columns (HopperTiles<D>::PV_PARTS), one
  // after the other into the same tile accumulator.
  constexpr int NP = ONE ? 1 : HopperTiles<D>::PV_PARTS;
  constexpr int DP = D / NP;
  static_assert(NP >= 1 && NP <= 4 && D % NP == 0, "P·V in one to four column parts");
  const uint32_t ones_addr = smem_u32(s_ones);
  // l: the float32 row sums of the unrounded weights (the LSE); lsum: the
  // sums of the rounded weights, from the tensor cores (the normalizer).
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, lsum[2] = {0.f, 0.f};
  float o[D / 2];  // O: the sum of the finished tiles
#pragma unroll
  for (int i = 0; i < D / 2; i++) o[i] = 0.f;
  float ot[DP / 2];  // one column part of one tile's P·V
  float lt[4];       // one tile's P·ones: its rows' sums
  float s[SN / 2];       // scores of tile t, then its weights P·2^8
  // The weights as wgmma A registers (E4M3), tile t's in pa[t % 2], so that
  // they are packed while P·V still reads the previous tile's.
  using PA = uint32_t[SN / 32][4];
  PA pa[2];
  // ONEPA: pa[0] alone (HopperTiles<D>::ONE_PA).
  constexpr bool ONEPA = !ONE && NP == 1 && HopperTiles<D>::ONE_PA;

  // S = Q·K(t)ᵀ, issued (not waited for).
  auto issue_qk = [&](int t) {
    const int st = t % RING;
    mbar_wait(&k_full[st], (t / RING) & 1);
    const uint32_t k_addr = smem_u32(s_k + st * G::KT);
    wg_fence();
    // The k steps that hold head-dim columns: the image's zero columns
    // past D (D 96 and 192, padded to DK 128 and 256) add nothing to a
    // score, so they are not multiplied.
    constexpr int KSTEPS = (D + 31) / 32;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
      const int panel = 32 * kk / WK, off = 32 * kk % WK;
      WGMMA<SN>::ss(s, desc<WK>(q_addr + panel * 64 * WK + off), desc<WK>(k_addr + panel * BN * WK + off), kk);
    }
    wg_commit();
  };
  // P(t)·V(t) (its column part `part`: V's transposed rows DP·part ..
  // +DP-1), issued (not waited for), P from a: into ot (the first k step
  // overwrites it); with part 0, P(t)·ones into lt. A block of ones in any layout is all ones: its
  // descriptor only has to stay inside it.
  auto fence_pv = [&]() {
    fence_regs(ot);
    fence_regs(lt);
  };
  auto issue_pv = [&](int t, const PA& a, auto part) {
    constexpr int P = decltype(part)::value;
    const int st = t % RING;
    if (P == 0) mbar_wait(&v_full[st], (t / RING) & 1);
    const uint32_t v_addr = smem_u32(s_v + st * G::VT) + P * DP * BN;
    fence_pv();
    wg_fence();
#pragma unroll
    for (int k = 0; k < BN / 32; k++) {
      WGMMA<DP>::rs(ot, a[k], desc<WV>(v_addr + 32 * k), k > 0);
      if constexpr (P == 0) WGMMA<8>::rs(lt, a[k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
    wg_commit();
  };
  // The online softmax of tile t on s: masked keys (and keys past sk, zero
  // in the image) become -Inf; row maxima on the raw scores (c > 0), then in
  // the log2 domain; P·2^8 = exp2(s·c - m + 8), one FFMA and one EX2 a
  // weight, so that E4M3 holds P in [2^-17, 256]. Returns the rescale
  // factors of rows r0 and r0 + 8 (o is left to the caller: a P·V may
  // still be running on it).
  auto softmax = [&](int t) {
    // One branch around the whole mask, so that full tiles do not run it
    // predicated off.
    if ((t + 1) * SN > vis_min) {
#pragma unroll
      for (int i = 0; i < SN / 2; i++) {
        const int key = t * SN + 8 * (i / 4) + 2 * tq + (i & 1);
        if (key >= ((i & 2) ? vis1 : vis0)) s[i] = NEG_INF;
      }
    }
    // Row maxima and sums over CH independent chains per row (element i
    // of the thread belongs to row (i >> 1) & 1, chain (i >> 2) % CH): a
    // single chain is a run of dependent instructions that two warps per
    // scheduler cannot hide.
    constexpr int CH = 4;
    float mx[2][CH];
#pragma unroll
    for (int j = 0; j < CH; j++) mx[0][j] = mx[1][j] = NEG_INF;
#pragma unroll
    for (int i = 0; i < SN / 2; i++) mx[(i >> 1) & 1][(i >> 2) % CH] = fmaxf(mx[(i >> 1) & 1][(i >> 2) % CH], s[i]);
    const float mx0 = fmaxf(fmaxf(mx[0][0], mx[0][1]), fmaxf(mx[0][2], mx[0][3]));
    const float mx1 = fmaxf(fmaxf(mx[1][0], mx[1][1]), fmaxf(mx[1][2], mx[1][3]));
    const OnlineStep st0 = online_step(m[0], group_max<4>(mx0) * c), st1 = online_step(m[1], group_max<4>(mx1) * c);
    const float off0 = 8.f - st0.m_use, off1 = 8.f - st1.m_use;
    float sum[2][CH] = {};
#pragma unroll
    for (int i = 0; i < SN / 2; i++) {
      s[i] = ex2(fmaf(s[i], c, (i & 2) ? off1 : off0));
      sum[(i >> 1) & 1][(i >> 2) % CH] += s[i];
    }
    l[0] = fmaf(l[0], st0.alpha, (sum[0][0] + sum[0][1]) + (sum[0][2] + sum[0][3]));
    l[1] = fmaf(l[1], st1.alpha, (sum[1][0] + sum[1][1]) + (sum[1][2] + sum[1][3]));
    return make_float2(st0.alpha, st1.alpha);
  };
  // a = the weights in s as E4M3 A registers (keys in sigma order).
  auto pack_p = [&](PA& a) {
#pragma unroll
    for (int k = 0; k < SN / 32; k++) {
      const int j = 16 * k;
      a[k][0] = pack4(s[j + 0], s[j + 1], s[j + 4], s[j + 5]);
      a[k][1] = pack4(s[j + 2], s[j + 3], s[j + 6], s[j + 7]);
      a[k][2] = pack4(s[j + 8], s[j + 9], s[j + 12], s[j + 13]);
      a[k][3] = pack4(s[j + 10], s[j + 11], s[j + 14], s[j + 15]);
    }
  };
  // Ping-pong (PINGPONG): the two consumer warpgroups take turns to issue
  // their GEMMs (barriers 1 and 2), so that one's softmax runs under the
  // other's GEMMs; or (SOFTMAX_TURNS) to run their softmaxes (barriers 3
  // and 4). The one-tile form has one consumer warpgroup.
  constexpr bool SMTURNS = !ONE && HopperTiles<D>::SOFTMAX_TURNS;
  constexpr bool PINGPONG = !ONE && HopperTiles<D>::PINGPONG;
  static_assert(!(SMTURNS && PINGPONG), "turns on barriers 1-4: one protocol at a time");
  const Turns<PINGPONG, 1> gemm_turns{cw};
  const Turns<SMTURNS, 3> softmax_turns{cw};
  // The softmax's arithmetic stays inside its turn.
  auto softmax_turn = [&]() {
    softmax_turns.take();
    if constexpr (SMTURNS) fence_regs(s);
  };
  auto softmax_done = [&]() {
    if constexpr (SMTURNS) fence_regs(s);
    softmax_turns.pass();
  };
  auto release = [&](int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[t % RING]);
  };

  if (ONE && ntiles > 0) {
    // One tile of 2·BN keys (tiles 0 and 1 in ring slots 0 and 1, on slot
    // 0's barriers): S, its softmax from m = -Inf (no rescale), then P·V
    // and P·ones in two halves of BN keys, V's two tiles: the second half
    // into ot, added to the first in float32, as the tiled kernel adds its
    // tiles (the same rounding of each tile's sums by the tensor cores); the
    // row sums' halves likewise.
    if (!QC) mbar_wait(q_full, 0);
    if (QC) mbar_wait(&k_full[0], 0);
    QP_STAMP(QC && threadIdx.x == 128, 1, 0);
    issue_qk(0);
    wg_wait<0>();
    fence_regs(s);
    softmax(0);
    pack_p(pa[0]);
    fence_regs(pa[0]);
    QP_STAMP(QC && threadIdx.x == 128, 1, 6);
    mbar_wait(&v_full[0], 0);
    const uint32_t v_addr = smem_u32(s_v);
    const uint32_t v2_addr = v_addr + G::VT;
    // B of k step kk (keys 32kk .. 32kk+31) of P·V: the V image's tiles of
    // BN keys, or QC's sub-tiles of ONE_BM keys (64-byte rows).
    auto v_desc = [&](int kk) {
      if constexpr (QC) {
        constexpr int per = G::ONE_BM / 32;
        return desc<G::ONE_BM>(v_addr + kk / per * (G::ONE_BM * D) + 32 * (kk % per));
      } else {
        return desc<WV>((kk < BN / 32 ? v_addr : v2_addr) + 32 * (kk % (BN / 32)));
      }
    };
    float lt2[4];
    fence_regs(o);
    fence_pv();
    fence_regs(lt2);
    wg_fence();
#pragma unroll
    for (int k = 0; k < BN / 32; k++) {
      WGMMA<D>::rs(o, pa[0][k], v_desc(k), k > 0);
      WGMMA<8>::rs(lt, pa[0][k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
#pragma unroll
    for (int k = 0; k < BN / 32; k++) {
      WGMMA<DP>::rs(ot, pa[0][BN / 32 + k], v_desc(BN / 32 + k), k > 0);
      WGMMA<8>::rs(lt2, pa[0][BN / 32 + k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    fence_pv();
    fence_regs(lt2);
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] += ot[i];
    lsum[0] = lt[0] + lt2[0];
    lsum[1] = lt[2] + lt2[2];
  } else if (ntiles > 0) {
    // Warpgroup 0 goes first; every turn taken is passed on, and warpgroup
    // 0 takes one more at the end, so that every barrier ends balanced.
    auto stamp = [&](int t, int slot) { loop_stamp(tid == 0, cw, t, slot); };
    if (cw == 1) {
      gemm_turns.pass();
      softmax_turns.pass();
    }
    mbar_wait(q_full, 0);
    stamp(0, 2);
    gemm_turns.take();
    stamp(0, 3);
    issue_qk(0);
    gemm_turns.pass();
    stamp(0, 4);
    wg_wait<0>();
    fence_regs(s);
    stamp(0, 5);
    softmax_turn();
    float2 alpha = softmax(0);  // o is zero: rescaling it changes nothing
    softmax_done();
    float2 alpha_pv = alpha;    // the factors of the tile whose P·V is in flight
    PROFILE_ONLY(fence_regs(s));
    stamp(0, 6);
    pack_p(pa[0]);
    stamp(0, 7);
    // fold adds a finished tile's P·V (its column part `part`) and row
    // sums (with part 0) to o and lsum, rescaled by that tile's factors
    // first: o·alpha + ot, in float32. Column part p is o[p·DP/2 ..]
    // (wmma.WGMMAAcc: 4 registers per 8 columns).
    auto fold = [&](auto part) {
      constexpr int P = decltype(part)::value;
#pragma unroll
      for (int i = 0; i < DP / 2; i++) {
        float& x = o[P * (DP / 2) + i];
        x = fmaf(x, (i & 2) ? alpha_pv.y : alpha_pv.x, ot[i]);
      }
      if constexpr (P == 0) {
        lsum[0] = fmaf(lsum[0], alpha_pv.x, lt[0]);
        lsum[1] = fmaf(lsum[1], alpha_pv.y, lt[2]);
      }
    };
    // finish: the wait for every wgmma issued (at a step's start, the last
    // part of P(t-2)·V(t-2)), folded at once. (Issuing Q·K(t)ᵀ before that
    // fold measured slower, 707 against 747 TFLOP/s at D 128: the fold
    // then delays P(t-1)·V(t-1), which needs ot back; docs/PERF.md.)
    auto finish = [&]() {
      wg_wait<0>();
      fence_pv();
    };
    // With NP column parts, part p + 1 is issued once the softmax is done
    // and part p folded (next_part). (Ping-pong takes no turn for them.)
    auto next_part = [&](const PA& a, int t, auto part) {
      wg_wait<0>();
      fence_pv();
      fold(part);
      issue_pv(t, a, Part<decltype(part)::value + 1>{});
    };
    auto later_parts = [&](const PA& a, int t) {
      if constexpr (NP >= 2) next_part(a, t, Part<0>{});
      if constexpr (NP >= 3) next_part(a, t, Part<1>{});
      if constexpr (NP >= 4) next_part(a, t, Part<2>{});
    };
    // Intra-warpgroup overlap: Q·K(t)ᵀ and P(t-1)·V(t-1) are issued
    // together, and the softmax of tile t (and its packing into next, the
    // P registers the running P·V does not read) runs while P·V is on the
    // tensor cores. Each step begins with the wait for P(t-2)·V(t-2), so
    // that the wait starts a basic block: ptxas hoists a wait to the top of
    // its block, and a wait after the softmax in the same block would be
    // scheduled before it (docs/PERF.md, stage 9 v3). The fences keep the
    // compiler from sinking the softmax below that wait. (The later column
    // parts' waits, NP > 1, follow the softmax in its block.)
    auto step = [&](int t, const PA& prev, PA& next) {
      stamp(t, 0);
      if constexpr (!ONEPA) {
        finish();
        stamp(t, 1);
        if (t >= 2) {
          release(t - 2);
          fold(Part<NP - 1>{});
        }
      }
      stamp(t, 2);
      gemm_turns.take();
      stamp(t, 3);
      issue_qk(t);
      issue_pv(t - 1, prev, Part<0>{});
      alpha_pv = alpha;
      gemm_turns.pass();
      stamp(t, 4);
      wg_wait<1>();
      fence_regs(s);
      stamp(t, 5);
      softmax_turn();
      alpha = softmax(t);
      softmax_done();
      PROFILE_ONLY(fence_regs(s));
      stamp(t, 6);
      if constexpr (ONEPA) {  // P(t-1)·V(t-1) done before P(t) takes its registers
        finish();
        release(t - 1);
        fold(Part<0>{});
      }
      pack_p(next);
      fence_regs(next);
      fence_regs(s);
      later_parts(prev, t - 1);
      stamp(t, 7);
    };
    // Unrolled by two, so that the P buffers are registers named
    // statically; tile t's weights are in pa[t % 2].
    for (int t = 1; t < ntiles; t += 2) {
      if constexpr (ONEPA) {
        step(t, pa[0], pa[0]);
        if (t + 1 < ntiles) step(t + 1, pa[0], pa[0]);
      } else {
        step(t, pa[0], pa[1]);
        if (t + 1 < ntiles) step(t + 1, pa[1], pa[0]);
      }
    }
    if constexpr (!ONEPA) {
      finish();
      if (ntiles >= 2) {
        release(ntiles - 2);
        fold(Part<NP - 1>{});
      }
    }
    gemm_turns.take();
    // The last tile's weights, in registers named statically (a reference
    // chosen at run time would put pa in local memory).
    auto last = [&](const PA& a) {
      issue_pv(ntiles - 1, a, Part<0>{});
      alpha_pv = alpha;
      gemm_turns.pass();
      later_parts(a, ntiles - 1);
    };
    if (!ONEPA && (ntiles - 1) % 2) last(pa[1]);
    else last(pa[0]);
    finish();
    release(ntiles - 1);
    fold(Part<NP - 1>{});
    if (cw == 0) {
      gemm_turns.take();
      softmax_turns.take();
    }
  }

  if constexpr (QC) {  // every share has landed here (without a tile, too)
    mbar_wait(&k_full[0], 0);
    mbar_wait(&v_full[0], 0);
    cluster_arrive();
    vs = one_tile_v_scale<D>();
  }

  // Epilogue: the quad's partial row sums, then rows r0 and r0 + 8.
  QP_STAMP(FUSED && threadIdx.x == 128, 1, 3);
  const float l0 = group_sum<4>(l[0]), l1 = group_sum<4>(l[1]);
  float* out = p.out + b * p.o_batch_stride + h * p.o_head_stride;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = r0 + 8 * half;
    if (row >= sq) continue;
    const float lh = half ? l1 : l0;
    const bool keys = row_has_keys(lh);
    const float f = vs / lsum[half];
    float* orow = out + row * p.o_row_stride;
#pragma unroll
    for (int i = 2 * half; i < D / 2; i += 4) {
      const int col = 8 * (i / 4) + 2 * tq;
      const float2 v = keys ? make_float2(o[i] * f, o[i + 1] * f) : make_float2(0.f, 0.f);
      *(float2*)(orow + col) = v;
    }
    if (p.lse && tq == 0) p.lse[(b * p.hq + h) * p.sq + row] = row_lse(m[half] - 8.f, lh);
  }
  QP_STAMP(FUSED && threadIdx.x == 128, 1, 4);
  if constexpr (QC) cluster_wait();  // no block exits while its shares may still be read
}

}  // namespace hopper
