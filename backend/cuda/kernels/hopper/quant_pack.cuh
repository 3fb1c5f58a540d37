// hopper/quant_pack.cuh: quant_pack9, the fused quantization that writes
// the images from float32 inputs: its encode (Encoder, checked by
// testkernels_sm90a.cu's encode_check), cluster exchange and transposes. Included by hopper.cuh
// only, inside namespace hopper, in its order.
#pragma once

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
// with the attention in a graph, four of 256 9.80 (docs/design/quantize.md); fewer
// blocks leave the attention's next blocks SMs to start on.
constexpr int QUANT_PACK_THREADS = 512;
constexpr int QUANT_PACK_CLUSTER = 2;
constexpr int QUANT_PACK_CODES = (16 << 10);
constexpr int QUANT_PACK_VALS = QUANT_PACK_CODES / (4 * QUANT_PACK_THREADS);

// QP_STAMP(cond, kernel, slot) is a quantization event (profile.cuh, row 0,
// %globaltimer) with the SM in slot 7. Kernel PROFILE_QUANT, quant_pack9:
// 0 entry, 1 past pdl_wait, 2 its values loaded and their amax found, 3 the
// block's amax, 4 the cluster's exchanged, 5 the codes in shared memory, 6
// the images written. Kernel PROFILE_ATTENTION, stage9's blocks (every
// form): 0 entry, 1 past pdl_wait, 2 consumer 0 started, 3 its last tile
// done, 4 its rows written; the fused form's 5, the producer's copies
// issued; the tiled forms' 6, Q landed for consumer 0. The quantizing one-tile
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
    // copysign (an instruction a value).
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

// image_end is the rows of a head's image: Q's rows padded to a block of
// BM, K's and V's keys to a tile of BN.
template <int D> __device__ __forceinline__ int image_end(int kind, int rows) {
  using G = Geometry<D>;
  const int pad = kind == 0 ? G::BM : G::BN;
  return (rows + pad - 1) / pad * pad;
}

// image_rows writes rows w0 .. w1 - 1 of head's image (kind 0: Q, 1: K,
// 2: V) from codes, the head's codes of rows crow on in shared memory
// (row-major, D bytes a row), by NT threads (tid the caller's index among
// them): for Q and K pack_qk's image
// rows (zeros past the head's rows and past D; Q's codes negated where
// neg, a negative score factor), for V pack_v_image's 16-key groups
// (w0 and w1 multiples of 16; zero keys past the rows), swizzled as
// pack_v has it: a thread takes four columns of a group, sixteen 4-byte
// loads (a key's four columns each) and byte permutes into the four
// columns' 16 bytes (v_group's bytes, which it loads one a code). The
// rows it reads codes of, those below rows, lie in crow .. crow + the
// codes held.
template <int D, int NT>
__device__ __forceinline__ void image_rows(const Params& p, int kind, int head, const uint8_t* codes, int crow, int w0, int w1,
                                           int rows, bool neg, int tid) {
  using G = Geometry<D>;
  if (kind < 2) {
    constexpr int CH = G::DK / 16;
    const int rows_p = image_end<D>(kind, rows);
    uint8_t* dst = (kind == 0 ? p.qi : p.ki) + (long long)head * rows_p * G::DK;
    for (int idx = tid; idx < (w1 - w0) * CH; idx += NT) {
      const int col = 16 * (idx % CH), row = w0 + idx / CH;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row < rows && col < D) v = negate_if(*(const uint4*)(codes + (row - crow) * D + col), neg);
      *(uint4*)(dst + (kind == 0 ? qk_image_offset<D, 64>(row, col) : qk_image_offset<D, G::BN>(row, col))) = v;
    }
  } else {
    // Threads 2i and 2i + 1 take the groups 2j and 2j + 1 of the same four
    // columns: their 16-byte stores are the two halves of one 32-byte
    // sector of each row they write (the swizzle keeps chunks 2j and
    // 2j + 1 of a row side by side), so that L2 takes whole sectors. A
    // group outside w0 .. w1 leaves its thread idle.
    constexpr int BN = G::BN, CH = BN / 16, DQ = D / 4;
    static_assert(CH % 2 == 0, "a tile's row holds whole pairs of groups");
    const int tiles = (rows + BN - 1) / BN, g0 = w0 / 16, g1 = w1 / 16, p0 = g0 / 2, p1 = (g1 + 1) / 2;
    for (int idx = tid; idx < (p1 - p0) * DQ * 2; idx += NT) {
      const int d = 4 * (idx / 2 % DQ), g = 2 * (p0 + idx / 2 / DQ) + idx % 2, tile = g / CH, cc = g % CH;
      if (g < g0 || g >= g1) continue;
      uint32_t w[16];  // w[q]: columns d..d+3 of the key at position q
#pragma unroll
      for (int q = 0; q < 16; q++) {
        const int key = 16 * g + sigma(q);
        w[q] = key < rows ? *(const uint32_t*)(codes + (key - crow) * D + d) : 0u;
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
}

// QuantChunk9 is a chunk of one head that a block of quant_pack9 or of
// its long form quantizes: head y of the grid's numbering (a head of Q,
// then of K, then of V: kind 0, 1, 2; head its index among them), chunk x
// of its rows, rows r0 .. r1 - 1 of the head's rows, R a chunk (a multiple
// of 16, so that no V key group straddles two); rs is the head's row
// stride and src its row r0, in float32 elements.
struct QuantChunk9 {
  int kind, head, rows, R, r0, r1;
  long long rs;
  const float* src;
};
// quant_chunk9 is chunk x of head y, R rows a chunk where R > 0, else
// the head's rows in nc chunks (rounded up to 16).
__device__ __forceinline__ QuantChunk9 quant_chunk9(const Params& p, int y, int x, int nc, int R) {
  const int nq = (int)(p.b * p.hq), nkv = (int)(p.b * p.hkv);
  QuantChunk9 q;
  q.head = y, q.kind = 0;
  if (q.head >= nq + nkv) q.kind = 2, q.head -= nq + nkv;
  else if (q.head >= nq) q.kind = 1, q.head -= nq;
  const int hper = (int)(q.kind == 0 ? p.hq : p.hkv), b = q.head / hper, h = q.head % hper;
  q.rows = (int)(q.kind == 0 ? p.sq : p.sk);
  q.R = R > 0 ? R : ((q.rows + nc - 1) / nc + 15) / 16 * 16;
  q.r0 = min(x * q.R, q.rows), q.r1 = min(q.r0 + q.R, q.rows);
  q.rs = q.kind == 0 ? p.q_row_stride : p.kv_row_stride;
  q.src = (const float*)(q.kind == 0 ? p.q : q.kind == 1 ? p.k : p.v) + b * (q.kind == 0 ? p.q_batch_stride : p.kv_batch_stride) +
          h * (q.kind == 0 ? p.q_head_stride : p.kv_head_stride) + q.r0 * q.rs;
  return q;
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
  const int tid = threadIdx.x, c = blockIdx.x;
  const QuantChunk9 q = quant_chunk9(p, blockIdx.y, c, NC, 0);
  const int kind = q.kind, head = q.head, rows = q.rows, R = q.R, r0 = q.r0, n = (q.r1 - r0) * D;
  const long long rs = q.rs;
  const float* src = q.src;
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
  // The codes into shared memory, then the chunk's part of the head's
  // image (image_rows; the tail: up to the padded rows or whole tiles).
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
  const int end = image_end<D>(kind, rows);
  image_rows<D, NT>(p, kind, head, codes, r0, min(c * R, end), tail ? end : min(c * R + R, end), rows, kind == 0 && f.scale < 0.0, tid);
  QP_STAMP(tid == 0, 0, 6);
}

// quant_pack9l is quant_pack9 for heads longer than its blocks' registers
// hold. Its geometry, exported as fp8attn_quantpack9l_config = {threads,
// blocks an SM, codes, held}, which the host launches it by:
// QUANT_LONG_THREADS a block (the first QUANT_LONG_LOADERS load, the
// others encode), QUANT_LONG_PER_SM blocks an SM (the launch bounds'), and
// dynamic shared memory of QUANT_LONG_CODES bytes (a part's codes) plus
// two buffers of a chunk's float32 values, each at most QUANT_LONG_HELD
// bytes. The host launches as many blocks as the device holds at once, at
// most one a chunk. Measured on the H200, the quantization alone of B4
// H32 S4096 at D 128 and D 256 and of B1 H8 S2048 D 64, against other
// geometries (threads, loaders, blocks an SM, KiB a buffer; two runs, the
// kept geometry in both): (384, 128, 2, 52), kept, 327-329, 656-658 and
// 9.7-9.8 µs; (256, 128, 2, 52) 341, 676-680 and 10.6; (512, 128, 2, 52)
// 336-337, 681-684 and 9.7 (64 registers); (448, 128, 2, 52) 336-337,
// 670-675 and 9.8; (384, 96, 2, 52) 375, 737-741 and 10.7; (448, 192, 2,
// 52) 382, 771 and 11.2; (416, 160, 2, 52) 385-386, 781-785 and 11.2; 384
// threads with 16 KiB of codes and 48 a buffer 330-333, 658-659 and 9.7.
// The kept geometry gives each of an SM's four schedulers one loader warp
// and two encoder warps of each block (presumably: warps are dealt to the
// schedulers in turn); with loaders in numbers of warps not a multiple of
// four the quantization took 9-19% longer. With each head's words cleared
// by its last chunk, half-and-half blocks measured against (256, 128, 2,
// 52): (256, 128, 3, 32) within 2.5% (9% faster on the short call), (384,
// 192, 2, 52) 10-12% slower, (128, 64, 4, 24) 30-80% slower, (512, 256, 1,
// 104) 18-19% slower.
constexpr int QUANT_LONG_THREADS = 384;
constexpr int QUANT_LONG_LOADERS = 128;
constexpr int QUANT_LONG_PER_SM = 2;
constexpr int QUANT_LONG_CODES = (8 << 10);
constexpr int QUANT_LONG_HELD = (52 << 10);

// copy_chunk issues the cp.async copies of a chunk's n4 float4 (rows of
// D values rs apart from src) into b, thread tid of NT taking float4 tid,
// tid + NT, ...: for (j = tid; j < n4; j += NT) cp_async16(b + j, src +
// (4j / D)·rs + 4j % D), with the source address stepped from one copy
// to the next (4·NT values: rows and a column carry) instead of divided
// out of j.
template <int D, int NT>
__device__ __forceinline__ void copy_chunk(float4* b, const float* src, long long rs, int n4, int tid) {
  constexpr int DR = 4 * NT / D, DC = 4 * NT % D;  // a step: DR rows and DC columns
  int c = 4 * tid % D;
  const float* a = src + (long long)(4 * tid / D) * rs + c;
  const long long step = DR * rs + DC, carry = rs - D;
  for (int j = tid; j < n4; j += NT) {
    cp_async16(b + j, a, true);
    a += step;
    if constexpr (DC != 0) {
      c += DC;
      if (c >= D) c -= D, a += carry;
    }
  }
}

// chunk_amax is amax_add over b's n4 float4, of thread tid of NT (float4
// tid, tid + NT, ...): the largest of the values' magnitude bits, which
// order non-negative floats, where it is finite; a thread that met a
// non-finite value takes amax4 over its values instead.
template <int NT> __device__ __forceinline__ float chunk_amax(const float4* b, int n4, int tid) {
  uint32_t t = 0u;
  for (int j = tid; j < n4; j += NT) t = top4(t, b[j]);
  if (t < 0x7F800000u) return __uint_as_float(t);
  float m = 0.f;
  for (int j = tid; j < n4; j += NT) m = amax4(m, b[j]);
  return m;
}

// QuantLongParams: quant_pack9_long's parameters: the fused parameters,
// its scratch words (2 + 2 a head of the grid's numbering: the ticket and
// the blocks done, then each head's amax and chunks arrived; zero before a
// launch, and left zero), and the rows of a chunk.
// Mirrored by backend/cuda's quantLongParams (fp8attn_quantlong_params_layout).
struct QuantLongParams {
  FusedQuantParams f;
  unsigned* words;
  int chunk_rows;
};

// named_sync and named_arrive are bar.sync and bar.arrive on named barrier
// id of n threads: quant_pack9_long's loaders and encoders meet on them.
__device__ __forceinline__ void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }

// arrive_chunk adds a chunk's amax m to its head's words hw (hw[0], by
// the bits, which order non-negative floats) and counts it arrived
// (hw[1]): reductions that return nothing, the count a release, so that
// the loader goes on at once and a reader that sees the count sees the
// amax.
__device__ __forceinline__ void arrive_chunk(unsigned* hw, float m) {
  asm volatile("red.relaxed.gpu.global.max.u32 [%0], %1;\n" ::"l"(hw), "r"(__float_as_uint(m)) : "memory");
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(hw + 1) : "memory");
}

// head_amax waits until n chunks of the head of words hw have arrived
// (arrive_chunk; an acquire of the count) and returns the head's amax.
__device__ __forceinline__ float head_amax(const unsigned* hw, int n) {
  unsigned c;
  do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(c) : "l"(hw + 1) : "memory");
  while (c < (unsigned)n);
  unsigned m;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(m) : "l"(hw) : "memory");
  return __uint_as_float(m);
}

// quant_pack9_long quantizes Q, K and V straight into stage 9's images as
// quant_pack9 does, bit for bit, for heads of up to as many chunks as the
// grid has blocks. The chunks are numbered head by head in the grid
// numbering of quant_pack9 (a head's chunks consecutive), and a block takes
// them in turn by ticket (an atomic counter) into its two buffers. Its
// first QUANT_LONG_LOADERS threads, the loaders, draw a chunk where a
// buffer is free, copy its values in (cp.async, all of them in flight at
// once), find their amax, add it to the head's word (atomicMax on the bits,
// which order non-negative floats) and count the chunk arrived. The others,
// the encoders, wait for every chunk of the buffer's head to arrive, then
// encode the chunk a part of QUANT_LONG_CODES bytes of codes at a time,
// each part's image rows written (image_rows; the head's last chunk also
// the padding), and free the buffer. So the next chunk's loads run while
// the encoders work, and a chunk arrives once its values have landed,
// whatever the encoders wait for. The head's first chunk writes its scale.
// The last block to finish clears the ticket and every head's words, so
// that no encoder spends a round trip to global memory a chunk counting
// itself done. Forward progress: an encoder waits only for the chunks of
// its head, a loader only for its block's encoders, and a head's chunks are
// drawn before any later head's, so with at most as many chunks a head as
// blocks run at once every wait ends (the host bounds the chunks by the
// blocks it launches, and those by what the device holds; a GPU whose SMs
// are shared with other work through MPS could hold fewer).
template <int D> __device__ __forceinline__ void quant_pack9_long(const QuantLongParams& lp) {
  constexpr int NT = QUANT_LONG_THREADS, NL = QUANT_LONG_LOADERS, NE = NT - NL;  // threads a block, loaders, encoders
  static_assert(NL % 32 == 0 && NE % 32 == 0 && NL > 0 && NE > 0, "whole warps of loaders and encoders");
  constexpr int PART = QUANT_LONG_CODES / D / 16 * 16;   // rows a part: whole V key groups
  static_assert(PART >= 16, "a part holds a V key group");
  // Named barriers: the loaders' own, the encoders' own, and a buffer's
  // full and free.
  constexpr int LOADERS = 1, ENCODERS = 2, FULL = 3, FREE = 5;
  extern __shared__ __align__(16) uint8_t smem_long[];  // QUANT_LONG_CODES of codes, then the two buffers
  uint8_t* const codes = smem_long;
  __shared__ float warp_max[NL / 32];
  __shared__ unsigned drawn[2];  // a buffer's ticket
  __shared__ float head_scale;
  const FusedQuantParams& f = lp.f;
  const Params& p = f.p;
  const int R = lp.chunk_rows;
  const int nq = (int)(p.b * p.hq), nkv = (int)(p.b * p.hkv);
  const int cq = ((int)p.sq + R - 1) / R, ck = ((int)p.sk + R - 1) / R;
  const unsigned total = (unsigned)(nq * cq + 2 * nkv * ck);
  unsigned* const words = lp.words;
  float4* const bufs = reinterpret_cast<float4*>(smem_long + QUANT_LONG_CODES);
  const int buf4 = R * D / 4;  // float4 a buffer
  // head is ticket t's head (quant_chunk9's y), chunk its chunk of it.
  const auto head = [&](unsigned t) { return t < (unsigned)(nq * cq) ? (int)t / cq : nq + ((int)t - nq * cq) / ck; };
  const auto chunk = [&](unsigned t) {
    const int y = head(t);
    return y < nq ? (int)t - y * cq : (int)t - nq * cq - (y - nq) * ck;
  };
  const auto chunks = [&](int y) { return y < nq ? cq : ck; };

  if (threadIdx.x < NL) {
    // The loaders: chunk k into buffer k % 2, once the encoders freed it
    // (of chunk k - 2).
    const int tid = threadIdx.x;
    int k = 0;
    for (;; k++) {
      const int i = k & 1;
      if (k >= 2) named_sync(FREE + i, NT);
      if (tid == 0) drawn[i] = atomicAdd(&words[0], 1u);
      named_sync(LOADERS, NL);
      const unsigned t = drawn[i];
      if (t < total) {
        const int y = head(t);
        const QuantChunk9 q = quant_chunk9(p, y, chunk(t), 0, R);
        float4* const b = bufs + i * buf4;
        const int n4 = (q.r1 - q.r0) * D / 4;
        copy_chunk<D, NL>(b, q.src, q.rs, n4, tid);
        cp_async_commit();
        cp_async_wait<0>();
        named_sync(LOADERS, NL);  // every loader's copies landed
        float m = chunk_amax<NL>(b, n4, tid);
        m = warp_amax(m);
        if (tid % 32 == 0) warp_max[tid / 32] = m;
        named_sync(LOADERS, NL);
        if (tid == 0) {
#pragma unroll
          for (int w = 1; w < NL / 32; w++) m = fmaxf(m, warp_max[w]);
          arrive_chunk(words + 2 + 2 * y, m);
        }
      }
      named_arrive(FULL + i, NT);
      if (t >= total) break;
    }
    if (k >= 1) named_sync(FREE + ((k + 1) & 1), NT);  // the encoders' last free (of chunk k - 1)
  } else {
    // The encoders: chunk k from buffer k % 2.
    const int tid = threadIdx.x - NL;
    for (int k = 0;; k++) {
      const int i = k & 1;
      named_sync(FULL + i, NT);
      const unsigned t = drawn[i];
      if (t >= total) break;
      const int y = head(t), x = chunk(t);
      const unsigned* const hw = words + 2 + 2 * y;
      if (tid == 0) head_scale = scale_for_amax(head_amax(hw, chunks(y)));  // every chunk of the head arrived
      named_sync(ENCODERS, NE);
      const Encoder enc(head_scale);
      const QuantChunk9 q = quant_chunk9(p, y, x, 0, R);
      if (tid == 0 && x == 0) ((float*)(q.kind == 0 ? p.q_scale : q.kind == 1 ? p.k_scale : p.v_scale))[q.head] = enc.s;
      // The parts: image rows w .. w + PART - 1 of the chunk's (the head's
      // last chunk's up to the image's end), their codes (rows below r1)
      // first.
      const int end = image_end<D>(q.kind, q.rows);
      const int w0 = q.r0, w1 = x == chunks(y) - 1 ? end : q.r0 + R;
      const bool neg = q.kind == 0 && f.scale < 0.0;
      const float4* const held = bufs + i * buf4;
      for (int w = w0; w < w1; w += PART) {
        const int we = min(w + PART, w1), base = (w - q.r0) * D / 4, cn = max(0, min(we, q.r1) - w) * D / 4;
#pragma unroll
        for (int u = 0; u < (PART * D / 4 + NE - 1) / NE; u++) {
          const int j = tid + u * NE;
          if (j < cn) {
            const float4 v = held[base + j];
            reinterpret_cast<uint32_t*>(codes)[j] = enc.fast ? enc.fast4(v) : encode4(v, enc.s);
          }
        }
        named_sync(ENCODERS, NE);
        image_rows<D, NE>(p, q.kind, q.head, codes, w, w, we, q.rows, neg, tid);
        named_sync(ENCODERS, NE);  // the part's codes read before the next part's overwrite them
      }
      named_arrive(FREE + i, NT);
    }
  }
  // The last block to finish clears every word: each block counts itself
  // done only once all its threads are past their last wait.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&words[1], 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last) {
    __threadfence();
    for (unsigned j = threadIdx.x; j < 2 + 2 * (unsigned)(nq + 2 * nkv); j += NT) words[j] = 0u;
  }
}
