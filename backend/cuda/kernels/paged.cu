// paged.cu: the paged FP8 KV cache on the GPU (issue #12). A module of its
// own, compute_89 PTX like the dense stages (it runs on Ada and, JIT-compiled,
// on Hopper), loaded by backend/cuda/paged.go.
//
//   fp8attn_paged_append   quantizes new tokens' keys and values into their
//                          pages under the scale policy of package backend,
//                          bit for bit as the cpu backend does.
//   fp8attn_paged_d{D}     attention of new queries (decode: one token; or a
//                          chunk) against the cache, split over the keys.
//   fp8attn_paged_merge    combines the splits by their log-sum-exps.
//   fp8attn_paged_check    flags a non-finite key or value of an append from
//                          device memory (before anything is written).
//
// Storage. Every (page, KV head) block holds its keys as rows, [P][D] codes,
// and its values transposed in groups of 32 keys, [P/32][D][32] codes (keys
// contiguous: the B operand of P·V; one tile's values one contiguous run of
// memory), with one power-of-two dequantization scale each for K and for V
// (0 while the block has held only zeros).
//
// The attention kernel. A block serves the query rows of one KV head (its
// query heads times the new positions, packed as the cpu backend packs them:
// row r is head kh·G + r%G at position r/G), 8 rows a block, against the
// keys of one split; its warps walk their own 32-key tiles (a page holds
// whole tiles) through their own 2-slot cp.async rings, each with its own
// online softmax, and merge at the end. Both products run on the f16 tensor
// cores (mma.sync m16n8k16, f32 accumulation), which have the K and V codes
// exactly (every E4M3 value is an f16), at float32 accuracy for the float32
// queries and weights: each is split into a high f16 part and the f16
// rounding of the rest (22 significant bits together), the high parts in
// rows 0-7 of the m16 tile and the low parts in rows 8-15, so that a lane
// holds both halves of its row's results in its C fragment (c0+c2, c1+c3).
// Each query row is scaled by a power of two (taken back in its score
// factor) so that its largest element is in [128, 256) and small elements
// keep their bits; the weights are scaled by 2^12 (taken back at the end) so
// that their low parts stay normal f16 down to 2^-26.
//
// Fragments (PTX ISA, mma.m16n8k16 with .f16 A/B): lane 4g+t holds A rows g
// and g+8 at k 2t, 2t+1 (a0, a1) and 2t+8, 2t+9 (a2, a3); B column g at k
// 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1); C row g at columns 2t, 2t+1 (c0, c1) and
// row g+8 (c2, c3). An ldmatrix (b16) row is 16 codes and gives lane 4g+t
// codes 4t..4t+3 of row g: converted to f16 pairs they are exactly b0 and b1
// if the k order within each 16 is d = 4t, 4t+1 for k = 2t, 2t+1 and d = 4t+2,
// 4t+3 for k = 2t+8, 2t+9; the queries' A fragments are built in that order.
// For P·V the same holds with keys in place of d, and the key tiles of Q·Kᵀ
// are read in the row order 0,1,4,5,8,9,12,13 | 2,3,6,7,10,11,14,15 of each
// 16 (the cp.async puts key k at that shared row), so that the C fragments
// of two n8 tiles are, register for register, the A fragment of P over the
// 16 keys: no shuffles.
//
// Changelog
//   v1 (2026-11-22): append, split-KV attention with GQA packing, merge; head
//                    dims 32-256 (multiples of 16 in PagedHeadDims); pages
//                    of any multiple of 32 tokens.
//   v2 (2026-11-22): the row sums no longer take the V-scale change of O's
//                    units (wrong results across pages of different V
//                    scales); a tile's page and scales are loaded one tile
//                    ahead of its copies, so no dependent global load waits
//                    between a tile's arrival and its math; the merge
//                    weighs each row once in shared memory and keeps four
//                    loads in flight (it walked 2·splits dependent loads per
//                    element: 49 splits cost about 50 us).
//   v3 (2026-11-22): values stored [P/32][D][32] per block (was [D][P]), so
//                    that a tile's values are one contiguous 32·D bytes
//                    instead of D runs of 32 bytes at a stride of P.
//   v4 (2026-11-22): the first tile's copies go out before the queries load;
//                    exp2 by ex2.approx; O is rescaled only when some row's
//                    factor is not 1; the merge runs a block per row
//                    (was one per 8 rows: 8 blocks for a decode step of one
//                    sequence) with every split's load in flight.
//   v5 (2026-11-22): the copy loops with compile-time trip counts, the score
//                    factor but for the page scale computed once a row
//                    (measured: no change, 48.0 / 31.3 / 100.2 us).
//   v6 (2026-11-22): the helpers it shares with the dense stages (cp.async,
//                    E4M3 decoding, NEG_INF, LN2) come from common.cuh.
//   v7 (2026-11-22): a page's V scale within 2^-8..2^3 of O's units is
//                    folded into its weights (O was rescaled at every page
//                    whose scale differed: about every other page on N(0,1)
//                    values, 64 FMUL each); K and V codes converted four at
//                    a time straight from the register's halves (no mask or
//                    shift: 128 fewer instructions a tile); the warps' rows
//                    padded in the merge (eight-way bank conflicts). With
//                    two blocks an SM instead of three and the split count
//                    chosen for that (paged.go, pagedOccupancy): 45.7 /
//                    28.5 / 81.0 us on issue #12's shapes (v6: 47.8 / 31.2 /
//                    100.2).
//   v8 (2026-11-22): the tiles' copies through L1 (cp.async.ca): the
//                    L1-bypassing copies had L2 send 1.75x the cache's bytes.
//   v9 (2026-11-22): fp8attn_paged_check, for appends whose keys and values
//                    are already in device memory (no copy through the host).
#include "common.cuh"  // NEG_INF, LN2, cp.async, E4M3 decoding; tiles.h

struct PagedParams {
  const uint8_t *k, *v;            // the pool: per (page, KV head) K [P][D], V [D][P]
  const float *k_scale, *v_scale;  // per (page, KV head)
  const float* q;                  // [B][Hq][Sq][D] with the strides below
  float *out, *lse;                // out as q; lse [B][Hq][Sq] or null
  float *part_out, *part_lse;      // the splits' partial rows: [item][split][8][D], [item][split][8]
  const int *seq_lens, *block_table;  // [B], [B][pages_per_seq]
  long long batch_stride, head_stride, row_stride;  // of q and out, in elements
  int b, hq, hkv, sq, d, page_size, pages_per_seq, mask;  // mask: 0 none, 2 causal lower-right
  int row_blocks, splits, tiles_per_split;  // grid (splits, hkv·row_blocks, b)
  float score_scale;  // softmax scale·log2(e), from float64 on the host
};

struct AppendParams {
  uint8_t *k, *v;
  float *k_scale, *v_scale;
  const float *src_k, *src_v;  // [B][Hkv][N][D] with the strides below
  const int* runs;             // [nruns][5]: batch entry, first token, tokens, page, first slot
  long long batch_stride, head_stride, row_stride;
  int hkv, d, page_size, nruns;
};

// CheckParams: the new keys and values of an append from device memory,
// n elements each (whole tensors), and the flag set when one is NaN or ±Inf.
struct CheckParams {
  const float *k, *v;
  int* bad;
  long long n;
};

#define PP_OFF(f) (int)offsetof(PagedParams, f)
#define CP_OFF(f) (int)offsetof(CheckParams, f)
#define AP_OFF(f) (int)offsetof(AppendParams, f)
extern "C" __device__ const int fp8attn_paged_params_layout[] = {
    (int)sizeof(PagedParams), PP_OFF(k), PP_OFF(v), PP_OFF(k_scale), PP_OFF(v_scale), PP_OFF(q), PP_OFF(out),
    PP_OFF(lse), PP_OFF(part_out), PP_OFF(part_lse), PP_OFF(seq_lens), PP_OFF(block_table), PP_OFF(batch_stride),
    PP_OFF(head_stride), PP_OFF(row_stride), PP_OFF(b), PP_OFF(hq), PP_OFF(hkv), PP_OFF(sq), PP_OFF(d),
    PP_OFF(page_size), PP_OFF(pages_per_seq), PP_OFF(mask), PP_OFF(row_blocks), PP_OFF(splits),
    PP_OFF(tiles_per_split), PP_OFF(score_scale)};
extern "C" __device__ const int fp8attn_append_params_layout[] = {
    (int)sizeof(AppendParams), AP_OFF(k), AP_OFF(v), AP_OFF(k_scale), AP_OFF(v_scale), AP_OFF(src_k),
    AP_OFF(src_v), AP_OFF(runs), AP_OFF(batch_stride), AP_OFF(head_stride), AP_OFF(row_stride), AP_OFF(hkv),
    AP_OFF(d), AP_OFF(page_size), AP_OFF(nruns)};
extern "C" __device__ const int fp8attn_check_params_layout[] = {
    (int)sizeof(CheckParams), CP_OFF(k), CP_OFF(v), CP_OFF(bad), CP_OFF(n)};

constexpr int CHECK_THREADS = 256;

// Sets *p.bad to 1 if any of the 2n elements is NaN or ±Inf (exponent all
// ones); leaves it alone otherwise. Grid-stride over the elements.
extern "C" __global__ void __launch_bounds__(CHECK_THREADS) fp8attn_paged_check(const CheckParams p) {
  bool bad = false;
  const long long stride = (long long)gridDim.x * CHECK_THREADS;
  for (long long i = (long long)blockIdx.x * CHECK_THREADS + threadIdx.x; i < p.n; i += stride) {
    const unsigned a = __float_as_uint(p.k[i]) & 0x7f800000u, b = __float_as_uint(p.v[i]) & 0x7f800000u;
    bad |= a == 0x7f800000u || b == 0x7f800000u;
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *p.bad = 1;
}

__device__ __forceinline__ uint8_t float_to_e4m3(float x) {
  return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
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
// Append. Block (run, KV head, K or V): the run's tokens go to consecutive
// slots of one page, in order, as the cpu backend puts them one by one: a
// token in slot 0 clears the block; the first nonzero token sets the scale;
// a token whose amax exceeds 448·scale grows it and re-encodes the block
// (exact: both scales are powers of two); then the token is encoded,
// x/scale rounded to nearest E4M3, saturating (nothing reaches 448·scale).
// The host launches runs that share a page in separate waves, in order.
constexpr int APPEND_THREADS = 128;

// The offset of value (slot, d) in its block: [P/32][D][32].
__device__ __forceinline__ long long v_index(int slot, int d, int D) {
  return (long long)(slot >> 5) * D * 32 + d * 32 + (slot & 31);
}

extern "C" __global__ void __launch_bounds__(APPEND_THREADS) fp8attn_paged_append(const AppendParams p) {
  const int* run = p.runs + 5 * blockIdx.x;
  const int b = run[0], t0 = run[1], count = run[2], page = run[3], slot0 = run[4];
  const int h = blockIdx.y, D = p.d, P = p.page_size;
  const bool is_v = blockIdx.z == 1;
  uint8_t* blk = (is_v ? p.v : p.k) + ((long long)page * p.hkv + h) * D * P;
  float* scale_at = (is_v ? p.v_scale : p.k_scale) + (long long)page * p.hkv + h;
  const float* src = (is_v ? p.src_v : p.src_k) + b * p.batch_stride + h * p.head_stride;
  __shared__ float red[APPEND_THREADS / 32];
  const int tid = threadIdx.x;
  float sc = *scale_at;
  for (int u = 0; u < count; u++) {
    const int slot = slot0 + u;
    const float* row = src + (long long)(t0 + u) * p.row_stride;
    if (slot == 0) {  // a new page: forget its previous owner
      for (int e = tid; e < D * P / 4; e += APPEND_THREADS) ((uint32_t*)blk)[e] = 0;
      sc = 0.f;
      __syncthreads();
    }
    float amax = 0.f;
    for (int d = tid; d < D; d += APPEND_THREADS) amax = fmaxf(amax, fabsf(row[d]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((tid & 31) == 0) red[tid >> 5] = amax;
    __syncthreads();
    amax = red[0];
#pragma unroll
    for (int w = 1; w < APPEND_THREADS / 32; w++) amax = fmaxf(amax, red[w]);
    if (amax > 0.f) {
      if (sc == 0.f) {
        sc = page_scale(amax);
      } else if (amax > 448.f * sc) {
        const float nw = page_scale(amax), ratio = sc / nw;
        for (int e = tid; e < D * P; e += APPEND_THREADS) blk[e] = float_to_e4m3(e4m3_to_float(blk[e]) * ratio);
        sc = nw;
        __syncthreads();
      }
    }
    for (int d = tid; d < D; d += APPEND_THREADS) {
      const uint8_t c = sc == 0.f ? 0 : float_to_e4m3(row[d] / sc);
      if (is_v) blk[v_index(slot, d, D)] = c;
      else blk[(long long)slot * D + d] = c;
    }
    __syncthreads();  // red is reused, and a later growth re-reads these codes
  }
  if (tid == 0) *scale_at = sc;
}

// ---------------------------------------------------------------------------
// Attention.


__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* smem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}

// Four E4M3 codes (the bytes of x) as two f16 pairs: bytes 0, 1 in lo,
// bytes 2, 3 in hi. From compute_89 on, the halves of x go to the hardware
// conversions as they are (no mask or shift: ptxas reads a register's
// halves directly); compute_80 has no E4M3 conversion instruction, and
// cuda_fp8.h's does it in integer arithmetic.
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
#if __CUDA_ARCH__ >= 890
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
#else
  const __half2_raw l = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x >> 16), __NV_E4M3);
  lo = (uint32_t)l.x | ((uint32_t)l.y << 16);
  hi = (uint32_t)h.x | ((uint32_t)h.y << 16);
#endif
}

// Splits a, b into f16 pairs: hi = (a, b) rounded, lo = the rest rounded.
__device__ __forceinline__ void split_f16x2(float a, float b, uint32_t& hi, uint32_t& lo) {
  __half2 h = __floats2half2_rn(a, b);
  float2 hf = __half22float2(h);
  __half2 l = __floats2half2_rn(a - hf.x, b - hf.y);
  hi = *(uint32_t*)&h;
  lo = *(uint32_t*)&l;
}

// 2^x by the SFU (ex2.approx, relative error about 2^-22, far inside the
// float32 tier; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The shared row of key k (0..31) of a tile: within each 16 keys, the order
// 0,1,4,5,8,9,12,13, 2,3,6,7,10,11,14,15.
__device__ __forceinline__ int key_row(int k) {
  return (k & 16) + 8 * ((k >> 1) & 1) + 2 * ((k & 15) >> 2) + (k & 1);
}

// The byte offset of 16-byte chunk c of value row d in a tile's V part (rows
// of 32 bytes): the chunks of rows d and d+4 swap, so that ldmatrix's eight
// rows fall in eight bank groups.
__device__ __forceinline__ int v_off(int d, int c) { return d * 32 + 16 * (c ^ ((d >> 2) & 1)); }

template <int D>
__device__ __forceinline__ void paged_attention(const PagedParams p) {
  using T = PagedTiles<D>;
  constexpr int NC = D / 16, NT = D / 8, KP = T::KPITCH, KEYS = T::KEYS, W = T::WARPS;
  static_assert(KEYS == 32 && T::ROWS == 8, "the fragment walk assumes 32-key tiles and 8 rows");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float sm_m[W][8], sm_l[W][8], sm_vs[W];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int split = blockIdx.x, kh = blockIdx.y / p.row_blocks, rb = blockIdx.y % p.row_blocks, b = blockIdx.z;
  const int group = p.hq / p.hkv, rows_total = group * p.sq, r0 = rb * 8;
  const int rows_n = min(8, rows_total - r0);
  const int n = p.seq_lens[b];
  // This lane's row g: query head h, position i; the keys it sees.
  const int row = r0 + g;
  const bool row_ok = g < rows_n;
  const int h = kh * group + row % group, i = row / group;
  int vis = 0;
  if (row_ok) vis = p.mask == 2 ? max(0, min(n, n - p.sq + i + 1)) : n;
  const int last_i = (r0 + rows_n - 1) / group;
  const int vis_max = p.mask == 2 ? max(0, min(n, n - p.sq + last_i + 1)) : n;
  const int tiles = (vis_max + KEYS - 1) / KEYS;
  const int ta = split * p.tiles_per_split, tb = min(tiles, ta + p.tiles_per_split);

  uint8_t* ring = smem + warp * T::RING * T::TILE;
  const long long blk_bytes = (long long)D * p.page_size;
  const int* table = p.block_table + (long long)b * p.pages_per_seq;
  auto page_of = [&](int tile) { return table[tile * KEYS / p.page_size]; };
  auto issue = [&](int tile, int page, int slot) {
    const int col = tile * KEYS % p.page_size;
    const uint8_t* kb = p.k + ((long long)page * p.hkv + kh) * blk_bytes + (long long)col * D;
    const uint8_t* vb = p.v + ((long long)page * p.hkv + kh) * blk_bytes + (long long)col * D;  // [D][32] at col
    uint8_t* sk = ring + slot * T::TILE;
    uint8_t* sv = sk + KEYS * KP;
    // Trip counts known at compile time (fully unrolled, the offsets folded
    // into constants but for the lane's own): KEYS·NC and 2·D are multiples
    // of 32 for every D that is a multiple of 16.
#pragma unroll
    for (int i = 0; i < KEYS * NC / 32; i++) {
      const int c = lane + 32 * i, key = c / NC, ch = c % NC;
      cp_async16_l1(sk + key_row(key) * KP + 16 * ch, kb + key * D + 16 * ch);
    }
#pragma unroll
    for (int i = 0; i < 2 * D / 32; i++) {
      const int c = lane + 32 * i, d = c >> 1, ch = c & 1;
      cp_async16_l1(sv + v_off(d, ch), vb + c * 16);
    }
  };

  // Software pipeline (the first tile's copies go out before the queries
  // load): the copies of tile T+W are issued before tile T is
  // computed, with T+W's page (and scales) loaded one iteration earlier
  // still, so that no dependent global load sits between a tile's wait and
  // its math.
  int slot = 0, page_next = 0;
  float ks = 0.f, vs = 0.f;
  if (ta + warp < tb) {
    const int pg = page_of(ta + warp);
    issue(ta + warp, pg, 0);
    ks = p.k_scale[(long long)pg * p.hkv + kh];
    vs = p.v_scale[(long long)pg * p.hkv + kh];
  }
  cp_async_commit();
  if (ta + warp + W < tb) page_next = page_of(ta + warp + W);
  // The query row as A fragments, high and low f16 parts, scaled by 2^qe.
  uint32_t qa[NC][4];
  int qe = 0;
  {
    const float* qp = p.q + b * p.batch_stride + h * p.head_stride + i * p.row_stride;
    float4 x[NC];
    float amax = 0.f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      x[c] = row_ok ? *(const float4*)(qp + 16 * c + 4 * t) : make_float4(0.f, 0.f, 0.f, 0.f);
      amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x[c].x), fabsf(x[c].y)), fmaxf(fabsf(x[c].z), fabsf(x[c].w))));
    }
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    if (amax > 0.f && amax <= 3.4e38f) {
      int ex;
      frexpf(amax, &ex);
      qe = 8 - ex;  // amax·2^qe in [128, 256)
    }
#pragma unroll
    for (int c = 0; c < NC; c++) {
      split_f16x2(ldexpf(x[c].x, qe), ldexpf(x[c].y, qe), qa[c][0], qa[c][1]);
      split_f16x2(ldexpf(x[c].z, qe), ldexpf(x[c].w, qe), qa[c][2], qa[c][3]);
    }
  }

  // The row's score factor but for its page's K scale (a power of two):
  // softmax scale·log2(e)·2^-qe.
  const float score_factor = ldexpf(p.score_scale, -qe);
  float m = NEG_INF, l = 0.f, vs_units = 0.f, vs_seen = 0.f, pscale = 4096.f;
  float o[NT][4];
#pragma unroll
  for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;

  for (int tile = ta + warp; tile < tb; tile += W) {
    float ks_next = 0.f, vs_next = 0.f;
    int page_after = 0;
    if (tile + W < tb) {
      issue(tile + W, page_next, slot ^ 1);
      ks_next = p.k_scale[(long long)page_next * p.hkv + kh];
      vs_next = p.v_scale[(long long)page_next * p.hkv + kh];
      if (tile + 2 * W < tb) page_after = page_of(tile + 2 * W);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncwarp();
    const uint8_t* sk = ring + slot * T::TILE;
    const uint8_t* sv = sk + KEYS * KP;
    const int j0 = tile * KEYS;

    // S = Q·Kᵀ over the 32 keys: n-tile j holds shared rows 8j..8j+7.
    float s[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t kr[4];
      ldmatrix_x4(kr, sk + lane * KP + 16 * c);  // matrix j = n-tile j, chunk c
#pragma unroll
      for (int j = 0; j < 4; j++) {
        uint32_t b0, b1;
        e4m3x4_to_f16x2(kr[j], b0, b1);
        mma_f16(s[j], qa[c], b0, b1);
      }
    }
    // Scores in the log2 domain; n-tile j, element e (0, 1) is key
    // 16(j>>1) + 4t + 2(j&1) + e. Keys at or past the row's limit are -inf.
    const float f = score_factor * ks;
    float sc[4][2], tmax = NEG_INF;
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int key = j0 + 16 * (j >> 1) + 4 * t + 2 * (j & 1) + e;
        const float x = (s[j][e] + s[j][e + 2]) * f;
        sc[j][e] = key < vis ? x : NEG_INF;
        tmax = fmaxf(tmax, sc[j][e]);
      }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
    const float m_new = fmaxf(m, tmax), mref = m_new == NEG_INF ? 0.f : m_new;
    const float alpha = fast_exp2(m - mref);
    m = m_new;
    // O is kept in units of vs_units, the V scale of a page this warp has
    // read (scales are powers of two, so every ratio below is exact). A page
    // whose scale is within 2^-8..2^3 of the units folds the ratio into its
    // weights, P·2^12·ratio (below 2^15; the low f16 part keeps the weights'
    // bits down to 2^-29 of the largest), and O stays as it is; a page
    // outside that range, or the first one with values, moves O to its own
    // units. A page of zeros changes nothing. The row sum l has no units.
    float o_alpha = alpha;
    if (vs != vs_seen) {  // a page boundary (the same for the whole warp)
      vs_seen = vs;
      if (vs != 0.f) {
        const float ratio = vs_units != 0.f ? vs / vs_units : 0.f;
        if (ratio >= 0x1p-8f && ratio <= 8.f) {
          pscale = 4096.f * ratio;
        } else {
          if (vs_units != 0.f) o_alpha *= vs_units / vs;
          vs_units = vs;
          pscale = 4096.f;
        }
      }
    }
    float psum = 0.f;
    uint32_t pa[2][4];  // A fragments of P·2^12 over keys 0-15 and 16-31
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float p0 = fast_exp2(sc[j][0] - mref), p1 = fast_exp2(sc[j][1] - mref);
      psum += p0 + p1;
      // n-tile 2γ gives a0/a1 (keys 4t, 4t+1 of 16γ), 2γ+1 gives a2/a3.
      split_f16x2(p0 * pscale, p1 * pscale, pa[j >> 1][2 * (j & 1)], pa[j >> 1][2 * (j & 1) + 1]);
    }
    l = l * alpha + psum;
    if (__any_sync(0xffffffffu, o_alpha != 1.f)) {  // the running max moved, or the V units
#pragma unroll
      for (int j = 0; j < NT; j++) {
        o[j][0] *= o_alpha;
        o[j][1] *= o_alpha;
        o[j][2] *= o_alpha;
        o[j][3] *= o_alpha;
      }
    }
    // O += P·V: B fragments from the transposed values, four d-tiles an ldmatrix.
#pragma unroll
    for (int gm = 0; gm < 2; gm++) {
#pragma unroll
      for (int j = 0; j + 4 <= NT; j += 4) {
        uint32_t vr[4];
        ldmatrix_x4(vr, sv + v_off(8 * j + lane, gm));
#pragma unroll
        for (int u = 0; u < 4; u++) {
          uint32_t b0, b1;
          e4m3x4_to_f16x2(vr[u], b0, b1);
          mma_f16(o[j + u], pa[gm], b0, b1);
        }
      }
      if constexpr (NT % 4 == 2) {
        uint32_t vr[2];
        ldmatrix_x2(vr, sv + v_off(8 * (NT - 2) + (lane & 15), gm));
#pragma unroll
        for (int u = 0; u < 2; u++) {
          uint32_t b0, b1;
          e4m3x4_to_f16x2(vr[u], b0, b1);
          mma_f16(o[NT - 2 + u], pa[gm], b0, b1);
        }
      }
    }
    __syncwarp();  // every lane is done with the slot before it is refilled
    slot ^= 1;
    ks = ks_next;
    vs = vs_next;
    page_next = page_after;
  }
  cp_async_wait<0>();
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // Merge the warps: each puts its state in shared memory (the rings, now
  // idle), then the block combines each (row, d).
  __syncthreads();
  // Rows SO floats apart (D + 8): the eight rows of a warp's 64-bit stores
  // fall on four bank offsets, two wavefronts a store (D apart: eight-way
  // conflicts).
  constexpr int SO = D + 8;
  static_assert(W * 8 * SO * 4 <= T::SMEM, "the warps' rows fit in the rings");
  float* so = (float*)smem;  // [W][8][SO]
  if (t == 0) {
    sm_m[warp][g] = m;
    sm_l[warp][g] = l;
  }
  if (lane == 0) sm_vs[warp] = vs_units;
#pragma unroll
  for (int j = 0; j < NT; j++) {
    *(float2*)&so[(warp * 8 + g) * SO + 8 * j + 2 * t] = make_float2(o[j][0] + o[j][2], o[j][1] + o[j][3]);
  }
  __syncthreads();
  const long long item = ((long long)b * p.hkv + kh) * p.row_blocks + rb;
  for (int e = threadIdx.x; e < 8 * D; e += W * 32) {
    const int r = e / D, d = e % D;
    float mx = NEG_INF;
    bool nan = false;
#pragma unroll
    for (int w = 0; w < W; w++) {
      mx = fmaxf(mx, sm_m[w][r]);
      nan = nan || sm_l[w][r] != sm_l[w][r];
    }
    float L = 0.f, acc = 0.f;
    if (mx != NEG_INF) {
#pragma unroll
      for (int w = 0; w < W; w++) {
        if (sm_m[w][r] == NEG_INF) continue;
        const float fw = exp2f(sm_m[w][r] - mx);
        L += fw * sm_l[w][r];
        acc += fw * (so[(w * 8 + r) * SO + d] * 0x1p-12f) * sm_vs[w];
      }
    }
    float val = L > 0.f ? acc / L : 0.f, lse2 = L > 0.f ? mx + log2f(L) : NEG_INF;
    if (nan) val = lse2 = __int_as_float(0x7fffffff);
    if (r >= rows_n) continue;
    if (p.splits > 1) {
      const long long part = item * p.splits + split;
      p.part_out[(part * 8 + r) * D + d] = val;
      if (d == 0) p.part_lse[part * 8 + r] = lse2;
    } else {
      const int rr = r0 + r, hh = kh * group + rr % group, ii = rr / group;
      p.out[b * p.batch_stride + hh * p.head_stride + ii * p.row_stride + d] = val;
      if (d == 0 && p.lse) p.lse[((long long)b * p.hq + hh) * p.sq + ii] = lse2 * LN2;
    }
  }
}

// Combines the splits of each row: with w_s = 2^(lse_s - max), out = Σ
// w_s·out_s / Σ w_s and lse = max + log2 Σ w_s (natural log on output). A row
// no split saw a key for gets zeros and -inf; a NaN in any split stays NaN.
// Grid (hkv·row_blocks, b, 8 rows), 256 threads: warp 0 weighs the row's
// splits into shared memory; then warp w sums splits w, w+8, ... with four
// columns a lane (16-byte loads, all in flight), and the warps' sums are
// added through shared memory.
constexpr int MERGE_THREADS = 256;

extern "C" __global__ void __launch_bounds__(MERGE_THREADS) fp8attn_paged_merge(const PagedParams p) {
  __shared__ float wts[256];                        // the row's split weights (splits <= 256)
  __shared__ __align__(16) float part_sum[8][256];  // each warp's column sums (D <= 256)
  __shared__ float row_sum, row_lse;
  const int kh = blockIdx.x / p.row_blocks, rb = blockIdx.x % p.row_blocks, b = blockIdx.y, r = blockIdx.z;
  const int D = p.d, S = p.splits, group = p.hq / p.hkv, r0 = rb * 8;
  if (r >= min(8, group * p.sq - r0)) return;
  const long long item = ((long long)b * p.hkv + kh) * p.row_blocks + rb;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp == 0) {
    const float* lse = p.part_lse + item * S * 8 + r;
    float mx = NEG_INF;
    bool nan = false;
    for (int s = lane; s < S; s += 32) {
      const float x = lse[s * 8];
      mx = fmaxf(mx, x);
      nan = nan || x != x;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    nan = __any_sync(0xffffffffu, nan);
    float sum = 0.f;
    for (int s = lane; s < S; s += 32) {
      const float x = lse[s * 8];
      const float w = x == NEG_INF ? 0.f : exp2f(x - mx);
      wts[s] = w;
      sum += w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
      row_sum = nan ? __int_as_float(0x7fffffff) : sum;
      row_lse = nan ? __int_as_float(0x7fffffff) : (sum > 0.f ? mx + log2f(sum) : NEG_INF);
    }
  }
  __syncthreads();
  const float sum = row_sum;
  const float* part = p.part_out + (item * S * 8 + r) * D;  // split s at part + s·8·D
  for (int d = 4 * lane; d < D; d += 128) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (sum > 0.f) {
#pragma unroll 4
      for (int s = warp; s < S; s += 8) {
        const float w = wts[s];
        const float4 x = *(const float4*)(part + (long long)s * 8 * D + d);
        acc.x += w * x.x;
        acc.y += w * x.y;
        acc.z += w * x.z;
        acc.w += w * x.w;
      }
    }
    *(float4*)&part_sum[warp][d] = acc;
  }
  __syncthreads();
  const int rr = r0 + r, hh = kh * group + rr % group, ii = rr / group;
  for (int d = threadIdx.x; d < D; d += MERGE_THREADS) {
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < 8; w++) acc += part_sum[w][d];
    float val = sum > 0.f ? acc / sum : 0.f;
    if (sum != sum) val = sum;
    p.out[b * p.batch_stride + hh * p.head_stride + ii * p.row_stride + d] = val;
  }
  if (threadIdx.x == 0 && p.lse) p.lse[((long long)b * p.hq + hh) * p.sq + ii] = row_lse * LN2;
}

// Entry points fp8attn_paged_d{D}, and each one's geometry for the loader's
// check against internal/tiles: ROWS, KEYS, WARPS, RING, SMEM.
#define FP8ATTN_PAGED_ENTRY(D)                                                                                 \
  extern "C" __global__ void __launch_bounds__(PagedTiles<D>::WARPS * 32) fp8attn_paged_d##D(const PagedParams p) { \
    paged_attention<D>(p);                                                                                     \
  }                                                                                                            \
  extern "C" __device__ const int fp8attn_paged_d##D##_config[] = {                                            \
      PagedTiles<D>::ROWS, PagedTiles<D>::KEYS, PagedTiles<D>::WARPS, PagedTiles<D>::RING, PagedTiles<D>::SMEM};
FP8ATTN_PAGED_ENTRY(32)
FP8ATTN_PAGED_ENTRY(64)
FP8ATTN_PAGED_ENTRY(80)
FP8ATTN_PAGED_ENTRY(96)
FP8ATTN_PAGED_ENTRY(128)
FP8ATTN_PAGED_ENTRY(160)
FP8ATTN_PAGED_ENTRY(192)
FP8ATTN_PAGED_ENTRY(256)
