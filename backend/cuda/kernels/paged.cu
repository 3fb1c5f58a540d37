// paged.cu: the paged FP8 KV cache on the GPU (issue #12). A module of its
// own, loaded by backend/cuda/paged.go: compute_89 PTX like the dense stages
// (Ada; compute_80 for Ampere), and an sm_90a cubin for Hopper that adds the
// warp-specialized attention kernel.
//
//   fp8attn_paged_append   quantizes new tokens' keys and values into their
//                          pages under the scale policy of package backend,
//                          bit for bit as the cpu backend does.
//   fp8attn_paged_d{D}     attention of new queries (decode: one token; or a
//                          chunk) against the cache, split over the keys
//                          (cp.async into per-warp rings; every GPU).
//   fp8attn_paged_ws_d{D}  the same, warp-specialized (bulk copies, sm_90a).
//   fp8attn_paged_wsq_d{D} the same, its blocks drawing their later units
//                          from a ticket (calls with more units than blocks).
//   fp8attn_paged_merge    combines the splits by their log-sum-exps (after
//                          fp8attn_paged_d{D}; the ws kernel merges itself).
//   fp8attn_paged_check    flags a non-finite key or value of an append from
//                          device memory (before anything is written).
//
// Storage. Every (page, KV head) block holds its keys as rows, [P][D] codes,
// and its values transposed in groups of 32 keys, [P/32][D][32] codes (keys
// contiguous: the B operand of P·V; one tile's values one contiguous run of
// memory), each tile's 16-byte chunks permuted as k_index and v_index say,
// with one power-of-two dequantization scale each for K and for V (0 while
// the block has held only zeros).
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
//   v10 (2026-11-22): the cache stores each tile as the kernels want it in
//                    shared memory (keys' chunks swizzled, values' halves
//                    swapped: k_index, v_index), and the sm_90a build adds
//                    fp8attn_paged_ws_d{D} (D <= 128): a persistent,
//                    warp-specialized kernel, bulk copies into a ring of
//                    RING slots, one producer warp for each of 8 consumer
//                    warps (setmaxnreg), the splits merged by the unit
//                    that finishes an item's last one. 41.4 / 27.0 us on
//                    B8 / B1 (cp.async kernel 43.3-43.6 / 27.9-28.3 in the
//                    same runs); on B64 (3.9 units a block) it was 2% slower
//                    and paged.go runs the cp.async kernel there. The
//                    experiments on the way are in docs/PERF.md (session 12).
//   v11 (2026-11-23): the warp-specialized kernel's bulk copies carry an
//                    evict_first L2 policy; each unit's length and first
//                    pages load while the one before streams; tile k of a
//                    unit goes to consumer warp k % 8 (a unit's result no
//                    longer depends on its block); ring slots in use per
//                    call (ws_slots). 38.9 / 24.5-24.8 us on B8 / B1.
//   v12 (2026-11-23): units of at most four rows (decode with GQA groups of
//                    up to four) run transposed in the warp-specialized
//                    kernel (PagedWarpT: Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ, half the
//                    MMAs), and paged.go gives it B64 (3.9 units a block).
//   v13 (2026-11-23): programmatic dependent launch (pdl.cuh) in the sm_90a
//                    build: every entry lets the next kernel's blocks be
//                    scheduled at once and waits for the one before it only
//                    where it first touches global memory (the ws kernel:
//                    after its barriers' set-up).
//   v14 (2026-11-23): the ws kernel's divisors made before pdl_wait
//                    (FastDiv), its split counter one acq_rel atomic (no
//                    fences), and merge_warps working each row's weights
//                    out once: the end of a call, measured by
//                    FP8ATTN_PAGED_WS_STAMPS builds, was 2-5 us of
//                    divisions, fences and repeated exponentials.
//   v15 (2026-11-23): the ws kernel's producers load their first unit's
//                    length and pages and work out its first tiles'
//                    places before pdl_wait (FP8ATTN_PAGED_WS_EARLY): the
//                    call's lengths and block table are written by host
//                    uploads only, so they may be read while the kernel
//                    before runs; each producer waits just before its
//                    first copy. merge_warps has every lane weigh its
//                    own row's values before they go to shared memory
//                    (two barriers, no lane working the weights out for
//                    every warp), and rows are written as sums; the
//                    split merge keeps 16 partial rows' loads in flight
//                    (was 8).
//   v16 (2026-11-23): the ends of the warp-specialized kernel's units
//                    shortened, none of its decode steps' streams: the
//                    split merge loads each chunk of 16 splits' LSEs with
//                    their partial rows (one trip to L2 where v15 made
//                    two); merge_warps writes each row's LSE from the stats
//                    the row's first lane already has (no second
//                    row_stats), its exponentials are the SFU's ex2 and
//                    its reductions trees, and it writes rows four columns
//                    a thread. B1 Sk32768 20.6 -> 19.75 us, B8 35.6 -> 34.75
//                    (H200, docs/PERF.md). Clusters to merge an item's
//                    splits through distributed shared memory were ruled
//                    out first: at one block an SM, the H200 holds 7
//                    clusters of 16 blocks (112 SMs), 15 of 8, 30 of 4.
//   v17 (2026-11-23): fp8attn_paged_wsq_d{D}, the warp-specialized kernel
//                    for calls with more units than blocks: a block's
//                    units after its first two are drawn from a ticket as
//                    it gets to them (UnitQueue), no longer dealt round
//                    robin. B64 Sk2048 65.0 -> 63.6 us; 64 sequences of
//                    64-4096 keys 80.3 -> 77.5 us (H200, docs/PERF.md).
#include "bulk.cuh"    // mbarriers, bulk copies (the warp-specialized kernel)
#include "pdl.cuh"     // programmatic dependent launch: every entry point keeps its contract
#include "profile.cuh"  // timelines (-DFP8ATTN_PROFILE builds only)

#include "common.cuh"  // NEG_INF, LN2, cp.async, E4M3 decoding; tiles.h

// WS_STAMP(cond, slot) is an event of the warp-specialized kernel
// (profile.cuh: kernel 0, row 0, %globaltimer), warp 0 of each block at its
// steps, the last unit's overwriting earlier ones: 0 entry, 1 past
// pdl_wait, 2 the first bulk copy issued (producer 0), 3 consumer warp 0's
// first tile landed, 4 every consumer's last tile done, 5 merge_warps done,
// 6 the split counter read, 7 the end; slot 8 is 1 where the block merged
// the splits, slot 9 its SM; 10 producer 0 past setmaxnreg, 11 its first
// unit's length and pages in registers, 12 its first tile's place worked
// out, 13 the merge's split weights loaded (warp 0), 14 its rows weighed,
// 15 consumer warp 0's first unit started (queries loaded); in the last
// unit's merge_warps (warp 0): 16 every warp arrived, 17 the maxima and
// sums stored, 18 the rows weighed and stored, 19 the rows combined and
// written; 20 st.finish done. backend/cuda's TestWSTimeline reads them.
#define WS_STAMP(cond, slot) PROFILE_TIME(cond, 0, 0, slot)

struct PagedParams {
  const uint8_t *k, *v;            // the pool: per (page, KV head) K [P][D], V [D][P]
  const float *k_scale, *v_scale;  // per (page, KV head)
  const float* q;                  // [B][Hq][Sq][D] with the strides below
  float *out, *lse;                // out as q; lse [B][Hq][Sq] or null
  float *part_out, *part_lse;      // the splits' partial rows: [item][split][8][D], [item][split][8]
  const int *seq_lens, *block_table;  // [B], [B][pages_per_seq]
  int* counters;                      // per item, splits finished (the warp-specialized kernel; 0 between launches)
  long long batch_stride, head_stride, row_stride;  // of q and out, in elements
  int b, hq, hkv, sq, d, page_size, pages_per_seq, mask;  // mask: 0 none, 2 causal lower-right
  int row_blocks, splits, tiles_per_split;  // grid (splits, hkv·row_blocks, b)
  float score_scale;  // softmax scale·log2(e), from float64 on the host
  int ws_slots;       // the warp-specialized kernel: ring slots in use (a multiple of its consumer warps)
  int* ticket;        // the warp-specialized kernel's units handed out at run time: null, or a counter (0 between launches)
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
    PP_OFF(lse), PP_OFF(part_out), PP_OFF(part_lse), PP_OFF(seq_lens), PP_OFF(block_table), PP_OFF(counters), PP_OFF(batch_stride),
    PP_OFF(head_stride), PP_OFF(row_stride), PP_OFF(b), PP_OFF(hq), PP_OFF(hkv), PP_OFF(sq), PP_OFF(d),
    PP_OFF(page_size), PP_OFF(pages_per_seq), PP_OFF(mask), PP_OFF(row_blocks), PP_OFF(splits),
    PP_OFF(tiles_per_split), PP_OFF(score_scale), PP_OFF(ws_slots), PP_OFF(ticket)};
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
  pdl_entry();
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

// The cache's layout within each 32-key tile of a (page, KV head) block: the
// tile is stored as it is wanted in shared memory, so that the
// warp-specialized kernel moves it with two bulk copies and the cp.async
// kernel with plain 16-byte copies.
//   Keys: row k (D codes) is key k; its 16-byte chunk c sits at chunk
//   c ^ k_swizzle(k), which puts the eight rows an ldmatrix reads (keys
//   key_of_row(8j..8j+7), below) in distinct bank groups where the row
//   length allows it (D a multiple of 128 bytes or 64: every group; other
//   D: fewer conflicts, or as many as unswizzled).
//   Values: [D][32], row d the 32 keys of dimension d; its chunk c (keys
//   16c..16c+15) at chunk c ^ ((d >> 2) & 1) (v_off: rows d and d+4 of an
//   ldmatrix fall in different bank groups).

// The shared row of key k (0..31) of a tile as the fragments read it: within
// each 16 keys, the order 0,1,4,5,8,9,12,13, 2,3,6,7,10,11,14,15 (see the
// attention kernel's notes). key_of_row is its inverse.
__host__ __device__ __forceinline__ int key_row(int k) {
  return (k & 16) + 8 * ((k >> 1) & 1) + 2 * ((k & 15) >> 2) + (k & 1);
}
__host__ __device__ __forceinline__ int key_of_row(int r) {
  return (r & 16) | (r & 1) | (((r >> 3) & 1) << 1) | (((r >> 1) & 3) << 2);
}

// The chunk swizzle of key k in rows of nc 16-byte chunks: the ldmatrix row
// of the key (mod 8) scaled to the largest power of two (at most 8) that
// divides nc, so that the XOR stays inside the row.
__host__ __device__ __forceinline__ int k_swizzle(int k, int nc) {
  const int s = (nc & -nc) < 8 ? (nc & -nc) : 8;
  return (key_row(k) & 7) * s >> 3;
}

// The byte offset of chunk c of value row d in a tile's values (rows of 32
// bytes).
__host__ __device__ __forceinline__ int v_off(int d, int c) { return d * 32 + 16 * (c ^ ((d >> 2) & 1)); }

// The offsets of key (slot, d) and value (slot, d) in a block of D·P codes.
__device__ __forceinline__ long long k_index(int slot, int d, int D) {
  return (long long)slot * D + 16 * ((d >> 4) ^ k_swizzle(slot & 31, D >> 4)) + (d & 15);
}
__device__ __forceinline__ long long v_index(int slot, int d, int D) {
  return (long long)(slot >> 5) * D * 32 + v_off(d, (slot >> 4) & 1) + (slot & 15);
}

extern "C" __global__ void __launch_bounds__(APPEND_THREADS) fp8attn_paged_append(const AppendParams p) {
  pdl_entry();
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
      else blk[k_index(slot, d, D)] = c;
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

// A work unit: the query rows of sequence b's KV head kh in row block rb
// (8 rows; row r0+g is query head kh·G + (r0+g)%G at position (r0+g)/G, G
// the query heads a KV head serves) against the tiles [ta, tb) of key split
// split. Units are numbered item-major (an item, a (b, kh, rb), has its
// splits consecutive): unit u writes partial rows u.
struct PagedUnit {
  int b, kh, rb, split, group, r0, rows_n, n, ta, tb;
};

// FastDiv divides 0 <= n < 2^31 by a fixed d >= 1 with a multiply-high, an
// add and a shift (Granlund and Montgomery; CUTLASS's FastDivmod): s =
// ceil(log2 d), m = floor(2^32·(2^s - d)/d) + 1, n/d = (umulhi(n, m) + n) >> s.
// Making one costs a 64-bit division; a runtime int division costs some 20
// dependent instructions. The warp-specialized kernel makes its divisors
// before pdl_wait (PagedDivs): a unit's place from its number took 11 such
// divisions, 1.2 us between a block's first loads and its first copy
// (TestWSTimeline).
struct FastDiv {
  int d;
  unsigned m, s;
  __device__ __forceinline__ explicit FastDiv(int d_) : d(d_) {
    s = 32 - __clz(d - 1);
    m = (unsigned)((((unsigned long long)((1ull << s) - d)) << 32) / (unsigned)d) + 1;
  }
  __device__ __forceinline__ int div(int n) const { return (int)((__umulhi((unsigned)n, m) + (unsigned)n) >> s); }
  __device__ __forceinline__ int mod(int n) const { return n - div(n) * d; }
};

// PlainDiv is the runtime division, for code run once a block (the cp.async
// kernel's unit).
struct PlainDiv {
  int d;
  __device__ __forceinline__ int div(int n) const { return n / d; }
};

// paged_unit_n is unit (b, kh, rb, split) of a sequence n keys long; group
// divides by the GQA group p.hq / p.hkv.
template <class Div>
__device__ __forceinline__ PagedUnit paged_unit_n(const PagedParams& p, int b, int kh, int rb, int split, int n,
                                                  const Div& group) {
  PagedUnit u;
  u.b = b;
  u.kh = kh;
  u.rb = rb;
  u.split = split;
  u.group = group.d;
  u.r0 = rb * 8;
  u.rows_n = min(8, u.group * p.sq - u.r0);
  u.n = n;
  // The keys the unit's last row sees bound its tiles.
  const int last_i = group.div(u.r0 + u.rows_n - 1);
  const int vis_max = p.mask == 2 ? max(0, min(u.n, u.n - p.sq + last_i + 1)) : u.n;
  const int tiles = (vis_max + 31) / 32;
  u.ta = split * p.tiles_per_split;
  u.tb = min(tiles, u.ta + p.tiles_per_split);
  return u;
}

__device__ __forceinline__ PagedUnit paged_unit(const PagedParams& p, int b, int kh, int rb, int split) {
  return paged_unit_n(p, b, kh, rb, split, p.seq_lens[b], PlainDiv{p.hq / p.hkv});
}

// PagedDivs are the warp-specialized kernel's divisors, made before its
// pdl_wait from the launch's parameters alone.
struct PagedDivs {
  FastDiv splits, rbh, row_blocks, hkv, group, page;
  __device__ __forceinline__ explicit PagedDivs(const PagedParams& p)
      : splits(p.splits),
        rbh(p.row_blocks * p.hkv),
        row_blocks(p.row_blocks),
        hkv(p.hkv),
        group(p.hq / p.hkv),
        page(p.page_size) {}
};

// paged_unit_seq is the sequence of unit uid (units numbered item-major).
__device__ __forceinline__ int paged_unit_seq(const PagedDivs& dv, int uid) { return dv.rbh.div(dv.splits.div(uid)); }

// paged_unit_at is unit uid, its sequence n keys long.
__device__ __forceinline__ PagedUnit paged_unit_at(const PagedParams& p, const PagedDivs& dv, int uid, int n) {
  const int split = dv.splits.mod(uid), item = dv.splits.div(uid);
  return paged_unit_n(p, dv.rbh.div(item), dv.hkv.mod(dv.row_blocks.div(item)), dv.row_blocks.mod(item), split, n,
                      dv.group);
}

// load_query_row loads columns 16c+4t..16c+4t+3 of unit u's row r into
// x[c] (zeros for a row past the unit's) and returns qe, the power of two
// that brings the row's largest magnitude into [128, 256) (0 for a row of
// zeros or with a non-finite value); the four lanes of a quad (4g..4g+3)
// hold one row between them and agree on qe.
template <int NC>
__device__ __forceinline__ int load_query_row(const PagedParams& p, const PagedUnit& u, int r, int t,
                                              float4 (&x)[NC]) {
  const int row = u.r0 + r;
  const bool row_ok = r < u.rows_n;
  const int h = u.kh * u.group + row % u.group, i = row / u.group;
  const float* qp = p.q + u.b * p.batch_stride + h * p.head_stride + i * p.row_stride;
  float amax = 0.f;
#pragma unroll
  for (int c = 0; c < NC; c++) {
    x[c] = row_ok ? *(const float4*)(qp + 16 * c + 4 * t) : make_float4(0.f, 0.f, 0.f, 0.f);
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x[c].x), fabsf(x[c].y)), fmaxf(fabsf(x[c].z), fabsf(x[c].w))));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  int qe = 0;
  if (amax > 0.f && amax <= 3.4e38f) {
    int ex;
    frexpf(amax, &ex);
    qe = 8 - ex;  // amax·2^qe in [128, 256)
  }
  return qe;
}

// row_visible is the number of keys row r of unit u sees (0 past its rows).
__device__ __forceinline__ int row_visible(const PagedParams& p, const PagedUnit& u, int r) {
  if (r >= u.rows_n) return 0;
  const int i = (u.r0 + r) / u.group;
  return p.mask == 2 ? max(0, min(u.n, u.n - p.sq + i + 1)) : u.n;
}

// PagedRow is what PagedWarp and PagedWarpT keep of a row besides its
// queries and output: the running maximum and sum (log2 domain) and the
// units its output is kept in.
struct PagedRow {
  float m, l, vs_units, vs_seen, pscale;

  __device__ __forceinline__ void reset() {
    m = NEG_INF;
    l = vs_units = vs_seen = 0.f;
    pscale = 4096.f;
  }

  // fold_v_units returns the factor the output is multiplied by before a
  // tile whose page has V scale vs: alpha, the running maximum's rescale,
  // times any change of units. O is kept in units of vs_units, the V scale
  // of a page this warp has read (scales are powers of two, so every ratio
  // below is exact). A page whose scale is within 2^-8..2^3 of the units
  // folds the ratio into its weights, P·2^12·ratio (pscale; below 2^15: the
  // low f16 part keeps the weights' bits down to 2^-29 of the largest), and
  // O stays as it is; a page outside that range, or the first one with
  // values, moves O to its own units. A page of zeros changes nothing. The
  // row sum l has no units.
  __device__ __forceinline__ float fold_v_units(float vs, float alpha) {
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
    return o_alpha;
  }
};

// rescale_o multiplies the output accumulators by a where any lane's a is
// not 1 (the running maximum moved, or the V units).
template <int N>
__device__ __forceinline__ void rescale_o(float (&o)[N][4], float a) {
  if (__any_sync(0xffffffffu, a != 1.f)) {
#pragma unroll
    for (int j = 0; j < N; j++) {
      o[j][0] *= a;
      o[j][1] *= a;
      o[j][2] *= a;
      o[j][3] *= a;
    }
  }
}

// PagedWarp is one warp's online softmax over the tiles it takes of a unit:
// lane 4g+t holds row g. Both attention kernels run it.
template <int D> struct PagedWarp : PagedRow {
  static constexpr int NC = D / 16, NT = D / 8;
  uint32_t qa[NC][4];  // the query row as A fragments, high and low f16 parts, scaled by 2^qe
  float score_factor;  // softmax scale·log2(e)·2^-qe (times a page's K scale per tile)
  float o[NT][4];
  int vis;  // the keys row g sees

  // start loads row g of unit u and clears the state.
  __device__ __forceinline__ void start(const PagedParams& p, const PagedUnit& u, int g, int t) {
    vis = row_visible(p, u, g);
    float4 x[NC];
    const int qe = load_query_row(p, u, g, t, x);
#pragma unroll
    for (int c = 0; c < NC; c++) {
      split_f16x2(ldexpf(x[c].x, qe), ldexpf(x[c].y, qe), qa[c][0], qa[c][1]);
      split_f16x2(ldexpf(x[c].z, qe), ldexpf(x[c].w, qe), qa[c][2], qa[c][3]);
    }
    score_factor = ldexpf(p.score_scale, -qe);
    reset();
#pragma unroll
    for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }

  // tile takes the 32 keys from j0 on: krow is this lane's ldmatrix row of
  // the tile's keys (the shared row the lane names) and ksw its chunk
  // swizzle (chunk c at krow + 16·(c ^ ksw)); sv the tile's values, laid out
  // as v_off says; ks and vs the page's scales.
  __device__ __forceinline__ void tile(const uint8_t* krow, int ksw, const uint8_t* sv, float ks, float vs, int j0,
                                       int lane, int t) {
    // S = Q·Kᵀ over the 32 keys: n-tile j holds shared rows 8j..8j+7.
    float s[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t kr[4];
      ldmatrix_x4(kr, krow + 16 * (c ^ ksw));  // matrix j = n-tile j, chunk c
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
    const float o_alpha = fold_v_units(vs, alpha);
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
    rescale_o(o, o_alpha);
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
  }

  // finish sums the row sum over the quad (each lane has its keys' share).
  __device__ __forceinline__ void finish() {
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
  }

  // put_stats puts this warp's maxima and sums in sm_m, sm_l and its V
  // units in sm_vs; row(lane) is the row whose values the lane holds; and
  // put_rows puts this warp's rows, each value times sc (the lane's row's
  // weight; 0 stays 0), in so (row r at so + (warp·8 + r)·SO). merge_warps.
  __device__ __forceinline__ void put_stats(float (*sm_m)[8], float (*sm_l)[8], float* sm_vs, int warp,
                                            int lane) const {
    const int g = lane >> 2, t = lane & 3;
    if (t == 0) {
      sm_m[warp][g] = m;
      sm_l[warp][g] = l;
    }
    if (lane == 0) sm_vs[warp] = vs_units;
  }
  __device__ __forceinline__ static int row(int lane) { return lane >> 2; }
  __device__ __forceinline__ static bool leads(int lane) { return (lane & 3) == 0; }  // the first lane of its row
  template <int SO>
  __device__ __forceinline__ void put_rows(float* so, int warp, int lane, float sc) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; j++)
      *(float2*)&so[(warp * 8 + g) * SO + 8 * j + 2 * t] =
          make_float2(sc != 0.f ? (o[j][0] + o[j][2]) * sc : 0.f, sc != 0.f ? (o[j][1] + o[j][3]) * sc : 0.f);
  }
};

// The 16-bit matrix transpose of an 8x8 fragment (lane 4r+c holds row r,
// columns 2c and 2c+1; after it, the same of the transposed matrix).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}

// f16_hi_lo packs v's f16 rounding (low half) and the f16 rounding of the
// rest (high half).
__device__ __forceinline__ uint32_t f16_hi_lo(float v) {
  const __half h = __float2half_rn(v), r = __float2half_rn(v - __half2float(h));
  return (uint32_t)__half_as_ushort(h) | ((uint32_t)__half_as_ushort(r) << 16);
}

// PagedWarpT is PagedWarp for units of at most four rows (a GQA group of up
// to four at one query position: decode), transposed: Sᵀ = K·Qᵀ with the
// tile's 32 keys as the MMA's rows (every row of an m16 tile used, where
// PagedWarp's Q·Kᵀ leaves 8 of its 16 empty at four rows) and row t's
// query as columns 2t (its high f16 part) and 2t+1 (the rest); Oᵀ = Vᵀ·Pᵀ
// likewise, P passed from the Sᵀ accumulators to the B operand by
// movmatrix. Half PagedWarp's MMAs, half its exponentials a lane, the output
// in half the registers. Lane 4g+t holds row t's state. The cache layouts
// are PagedWarp's: the key at shared row 16i+8h+g (key_of_row) is
// 16i+4(g>>1)+2h+(g&1), so the Sᵀ rows a lane holds are the keys whose
// values its V fragments pair them with.
template <int D> struct PagedWarpT : PagedRow {
  static constexpr int NC = D / 16, NT = D / 8, NM = D / 16;
  uint32_t qb[NC][2];  // B fragments of Qᵀ: column g is row g>>1's high (g even) or low part, scaled by 2^qe
  float score_factor;  // row t's: softmax scale·log2(e)·2^-qe (times a page's K scale per tile)
  // Oᵀ: dims 16j+g (o[j][0], o[j][1]: columns 2t, 2t+1) and 16j+8+g
  // (o[j][2], o[j][3]). PagedRow's fields are row t's.
  float o[NM][4];
  int vis;  // the keys row t sees

  __device__ __forceinline__ void start(const PagedParams& p, const PagedUnit& u, int g, int t) {
    float4 x[NC];  // the queries of row g>>1, as columns g
    const int qe = load_query_row(p, u, g >> 1, t, x);
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t hi0, lo0, hi1, lo1;
      split_f16x2(ldexpf(x[c].x, qe), ldexpf(x[c].y, qe), hi0, lo0);
      split_f16x2(ldexpf(x[c].z, qe), ldexpf(x[c].w, qe), hi1, lo1);
      qb[c][0] = g & 1 ? lo0 : hi0;
      qb[c][1] = g & 1 ? lo1 : hi1;
    }
    // Row t's own: its exponent (from lane 8t, which loaded row t) and the keys it sees.
    score_factor = ldexpf(p.score_scale, -__shfl_sync(0xffffffffu, qe, 8 * t));
    vis = row_visible(p, u, t);
    reset();
#pragma unroll
    for (int j = 0; j < NM; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }

  // tile: PagedWarp::tile's arguments and meaning.
  __device__ __forceinline__ void tile(const uint8_t* krow, int ksw, const uint8_t* sv, float ks, float vs, int j0,
                                       int lane, int t) {
    const int g = lane >> 2;
    // Sᵀ over the 32 keys: m-tile i is shared rows 16i..16i+15 (ldmatrix
    // matrices 2i and 2i+1, rows g and g+8 of the fragment).
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t kr[4];
      ldmatrix_x4(kr, krow + 16 * (c ^ ksw));
#pragma unroll
      for (int i = 0; i < 2; i++) {
        uint32_t a[4];
        e4m3x4_to_f16x2(kr[2 * i], a[0], a[2]);
        e4m3x4_to_f16x2(kr[2 * i + 1], a[1], a[3]);
        mma_f16(s[i], a, qb[c][0], qb[c][1]);
      }
    }
    const float f = score_factor * ks;
    float sc[2][2], tmax = NEG_INF;
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int key = j0 + 16 * i + 4 * (g >> 1) + 2 * h + (g & 1);
        const float x = (s[i][2 * h] + s[i][2 * h + 1]) * f;
        sc[i][h] = key < vis ? x : NEG_INF;
        tmax = fmaxf(tmax, sc[i][h]);
      }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 4));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 8));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 16));
    const float m_new = fmaxf(m, tmax), mref = m_new == NEG_INF ? 0.f : m_new;
    const float alpha = fast_exp2(m - mref);
    m = m_new;
    const float o_alpha = fold_v_units(vs, alpha);
    float psum = 0.f;
    uint32_t pb[2][2];  // B fragments of Pᵀ·2^12: k-step i (keys 16i..16i+15), rows 16i+g and 16i+8+g transposed
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float pv = fast_exp2(sc[i][h] - mref);
        psum += pv;
        pb[i][h] = movmatrix_trans(f16_hi_lo(pv * pscale));
      }
    l = l * alpha + psum;
    rescale_o(o, o_alpha);
    // Oᵀ += Vᵀ·Pᵀ: A fragments from the values (dims as rows), an ldmatrix
    // for two m-tiles of 16 dims.
#pragma unroll
    for (int i = 0; i < 2; i++) {
#pragma unroll
      for (int j = 0; j + 4 <= NT; j += 4) {
        uint32_t vr[4];
        ldmatrix_x4(vr, sv + v_off(8 * j + lane, i));
#pragma unroll
        for (int mm = 0; mm < 2; mm++) {
          uint32_t a[4];
          e4m3x4_to_f16x2(vr[2 * mm], a[0], a[2]);
          e4m3x4_to_f16x2(vr[2 * mm + 1], a[1], a[3]);
          mma_f16(o[j / 2 + mm], a, pb[i][0], pb[i][1]);
        }
      }
      if constexpr (NT % 4 == 2) {
        uint32_t vr[2];
        ldmatrix_x2(vr, sv + v_off(8 * (NT - 2) + (lane & 15), i));
        uint32_t a[4];
        e4m3x4_to_f16x2(vr[0], a[0], a[2]);
        e4m3x4_to_f16x2(vr[1], a[1], a[3]);
        mma_f16(o[NM - 1], a, pb[i][0], pb[i][1]);
      }
    }
  }

  // finish sums row t's sum over the lanes of its column (each has its keys' share).
  __device__ __forceinline__ void finish() {
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    l += __shfl_xor_sync(0xffffffffu, l, 8);
    l += __shfl_xor_sync(0xffffffffu, l, 16);
  }

  // put_stats, row and put_rows: PagedWarp's (rows 4-7 hold nothing: no
  // maximum, no sum).
  __device__ __forceinline__ void put_stats(float (*sm_m)[8], float (*sm_l)[8], float* sm_vs, int warp,
                                            int lane) const {
    const int g = lane >> 2, t = lane & 3;
    if (g < 2) {
      sm_m[warp][4 * g + t] = g == 0 ? m : NEG_INF;
      sm_l[warp][4 * g + t] = g == 0 ? l : 0.f;
    }
    if (lane == 0) sm_vs[warp] = vs_units;
  }
  __device__ __forceinline__ static int row(int lane) { return lane & 3; }
  __device__ __forceinline__ static bool leads(int lane) { return lane < 4; }  // the first lane of its row
  template <int SO>
  __device__ __forceinline__ void put_rows(float* so, int warp, int lane, float sc) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NM; j++) {
      so[(warp * 8 + t) * SO + 16 * j + g] = sc != 0.f ? (o[j][0] + o[j][1]) * sc : 0.f;
      so[(warp * 8 + t) * SO + 16 * j + 8 + g] = sc != 0.f ? (o[j][2] + o[j][3]) * sc : 0.f;
    }
  }
};

// RowStats are a merged row's: the largest of the warps' maxima, the sum L
// of their sums weighed by 2^(m_w - max), and whether a sum was NaN.
struct RowStats {
  float mx, L;
  bool nan;
};

// merge_exp2 is the merges' exponential: ex2 (the SFU's, subnormal results
// flushed: a warp or split weighs 0 where it is below 2^-126 of the
// largest); row_stats reduces by trees.
__device__ __forceinline__ float merge_exp2(float x) {
  return ex2(x);
}

// row_stats works row r's stats out of the W warps' maxima and sums (every
// value loaded at once: no load waits on another).
template <int W>
__device__ __forceinline__ RowStats row_stats(float (*sm_m)[8], float (*sm_l)[8], int r) {
  float mw[W], lw[W];
#pragma unroll
  for (int w = 0; w < W; w++) {
    mw[w] = sm_m[w][r];
    lw[w] = sm_l[w][r];
  }
  RowStats rs{NEG_INF, 0.f, false};
#pragma unroll
  for (int w = 0; w < W; w++) rs.nan = rs.nan || lw[w] != lw[w];
  static_assert((W & (W - 1)) == 0, "a tree over the warps");
  float t[W];
#pragma unroll
  for (int w = 0; w < W; w++) t[w] = mw[w];
#pragma unroll
  for (int h = W / 2; h > 0; h /= 2)
#pragma unroll
    for (int w = 0; w < h; w++) t[w] = fmaxf(t[w], t[w + h]);
  rs.mx = t[0];
#pragma unroll
  for (int w = 0; w < W; w++) t[w] = rs.mx != NEG_INF && mw[w] != NEG_INF ? merge_exp2(mw[w] - rs.mx) * lw[w] : 0.f;
#pragma unroll
  for (int h = W / 2; h > 0; h /= 2)
#pragma unroll
    for (int w = 0; w < h; w++) t[w] += t[w + h];
  rs.L = t[0];
  return rs;
}

// merge_warps combines the states of unit u of W warps (warp 0..W-1, lane):
// each puts its rows' maxima and sums in sm_m, sm_l and its V units in
// sm_vs; after a barrier every lane works its own row's stats out and puts
// its values in so ([W][8][SO] floats; with SO = D+8 the eight rows of a
// warp's 64-bit stores fall on four bank offsets, two wavefronts a store,
// where D apart conflicts eight ways) already weighed, times
// 2^(m_w - max)·vs_w·2^-12 / L (NaN for a row with a NaN sum, 0 for a warp
// or row that saw no key), while the first lanes of warp 0 write the rows'
// log-sum-exps and where their outputs start; after a second barrier the
// W·32 threads write the unit's rows, Σ_w so_w, to out (one split) or to
// its partial rows. sync is the barrier of those threads; it runs first,
// so that so may hold something else until then. (v13 worked the weights
// out again for every element; v14 had one lane a row work them out for
// every warp, between two more barriers: 0.86 of its 1.8 us at the end of
// a unit, TestWSTimeline.)
template <int D, int SO, int W, bool LEADER = false, class State, class Sync>
__device__ __forceinline__ void merge_warps(const PagedParams& p, const PagedUnit& u, const State& st, float* so,
                                            float (*sm_m)[8], float (*sm_l)[8], float* sm_vs, int warp, int lane,
                                            Sync sync) {
  __shared__ long long row_out[8];
  sync();
  WS_STAMP(warp == 0 && lane == 0, 16);
  st.put_stats(sm_m, sm_l, sm_vs, warp, lane);
  sync();
  WS_STAMP(warp == 0 && lane == 0, 17);
  const long long item = ((long long)u.b * p.hkv + u.kh) * p.row_blocks + u.rb;
  // row_end writes row r's log-sum-exp (partial or final) and puts where
  // its output goes in row_out.
  auto row_end = [&](const RowStats& rs, int r) {
    const float lse2 = rs.nan ? __int_as_float(0x7fffffff) : (rs.L > 0.f ? rs.mx + log2f(rs.L) : NEG_INF);
    if (p.splits > 1) {
      row_out[r] = ((item * p.splits + u.split) * 8 + r) * D;
      p.part_lse[(item * p.splits + u.split) * 8 + r] = lse2;
    } else {
      const int rr = u.r0 + r, hh = u.kh * u.group + rr % u.group, ii = rr / u.group;
      row_out[r] = u.b * p.batch_stride + hh * p.head_stride + ii * p.row_stride;
      if (p.lse) p.lse[((long long)u.b * p.hq + hh) * p.sq + ii] = lse2 * LN2;
    }
  };
  {
    const int r = State::row(lane);
    const RowStats rs = row_stats<W>(sm_m, sm_l, r);
    const float mine = sm_m[warp][r];
    float sc = 0.f;
    if (rs.nan)
      sc = __int_as_float(0x7fffffff);
    else if (rs.L > 0.f && mine != NEG_INF)
      sc = merge_exp2(mine - rs.mx) * 0x1p-12f * sm_vs[warp] / rs.L;
    st.template put_rows<SO>(so, warp, lane, sc);
    // LEADER (the warp-specialized kernel): the first lane of warp 0 that
    // holds row r writes its end from the stats it has. Otherwise lane r of
    // warp 0 works them out again (the cp.async kernel: keeping the stats
    // live past put_rows spilled its D=256 build for sm_80 and sm_89).
    if constexpr (LEADER) {
      if (warp == 0 && State::leads(lane) && r < u.rows_n) row_end(rs, r);
    }
  }
  if constexpr (!LEADER) {
    if (warp == 0 && lane < u.rows_n) row_end(row_stats<W>(sm_m, sm_l, lane), lane);
  }
  sync();
  WS_STAMP(warp == 0 && lane == 0, 18);
  float* dst = p.splits > 1 ? p.part_out : p.out;
  // (Rows start at multiples of D floats in dst and of SO in so: four
  // columns a thread, 16-byte accesses, where dst is 16-byte aligned.)
  if (((uintptr_t)dst & 15) == 0) {
    static_assert(D % 4 == 0 && SO % 4 == 0, "16-byte rows");
    for (int e = warp * 32 + lane; e < u.rows_n * (D / 4); e += W * 32) {
      const int r = e / (D / 4), d = 4 * (e % (D / 4));
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < W; w++) {
        const float4 x = *(const float4*)&so[(w * 8 + r) * SO + d];
        acc.x += x.x;
        acc.y += x.y;
        acc.z += x.z;
        acc.w += x.w;
      }
      *(float4*)&dst[row_out[r] + d] = acc;
    }
  } else {
    for (int e = warp * 32 + lane; e < u.rows_n * D; e += W * 32) {
      const int r = e / D, d = e % D;
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < W; w++) acc += so[(w * 8 + r) * SO + d];
      dst[row_out[r] + d] = acc;
    }
  }
  WS_STAMP(warp == 0 && lane == 0, 19);
}

// The cp.async kernel (every GPU from sm_80): a block per unit (grid
// (splits, hkv·row_blocks, b)); its warps walk their own tiles, tile
// ta+warp, ta+warp+W, ..., through their own 2-slot rings.
template <int D>
__device__ __forceinline__ void paged_attention(const PagedParams p) {
  using T = PagedTiles<D>;
  constexpr int NC = D / 16, KP = T::KPITCH, KEYS = T::KEYS, W = T::WARPS;
  static_assert(KEYS == 32 && T::ROWS == 8, "the fragment walk assumes 32-key tiles and 8 rows");
  constexpr int SO = D + 8;
  static_assert(W * 8 * SO * 4 <= T::SMEM, "the warps' rows fit in the rings");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float sm_m[W][8], sm_l[W][8], sm_vs[W];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const PagedUnit u = paged_unit(p, blockIdx.z, blockIdx.y / p.row_blocks, blockIdx.y % p.row_blocks, blockIdx.x);
  const int ta = u.ta, tb = u.tb, kh = u.kh;

  uint8_t* ring = smem + warp * T::RING * T::TILE;
  const long long blk_bytes = (long long)D * p.page_size;
  const int* table = p.block_table + (long long)u.b * p.pages_per_seq;
  auto page_of = [&](int tile) { return table[tile * KEYS / p.page_size]; };
  auto issue = [&](int tile, int page, int slot) {
    const int col = tile * KEYS % p.page_size;
    const uint8_t* kb = p.k + ((long long)page * p.hkv + kh) * blk_bytes + (long long)col * D;
    const uint8_t* vb = p.v + ((long long)page * p.hkv + kh) * blk_bytes + (long long)col * D;  // [D][32] at col
    uint8_t* sk = ring + slot * T::TILE;
    uint8_t* sv = sk + KEYS * KP;
    // Trip counts known at compile time (fully unrolled, the offsets folded
    // into constants but for the lane's own): KEYS·NC and 2·D are multiples
    // of 32 for every D that is a multiple of 16. Keys go to their shared
    // rows (key_row) at an odd pitch, unswizzled; values as they are stored.
#pragma unroll
    for (int i = 0; i < KEYS * NC / 32; i++) {
      const int c = lane + 32 * i, key = c / NC, ch = c % NC;
      cp_async16_l1(sk + key_row(key) * KP + 16 * ch, kb + key * D + 16 * (ch ^ k_swizzle(key, NC)));
    }
#pragma unroll
    for (int i = 0; i < 2 * D / 32; i++) {
      const int c = lane + 32 * i;
      cp_async16_l1(sv + c * 16, vb + c * 16);
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
  PagedWarp<D> st;
  st.start(p, u, g, t);

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
    st.tile(sk + lane * KP, 0, sk + KEYS * KP, ks, vs, tile * KEYS, lane, t);
    __syncwarp();  // every lane is done with the slot before it is refilled
    slot ^= 1;
    ks = ks_next;
    vs = vs_next;
    page_next = page_after;
  }
  cp_async_wait<0>();
  st.finish();
  // The rings are idle after the first barrier: the warps' rows go there.
  merge_warps<D, SO, W>(p, u, st, (float*)smem, sm_m, sm_l, sm_vs, warp, lane, [] { __syncthreads(); });
}

constexpr int MERGE_THREADS = 256;

// SplitWeights are a row's split weights (in shared memory) summed, with
// the largest split LSE (log2) and whether any split was NaN.
struct SplitWeights {
  float sum, mx;
  bool nan;
  // lse2 is the row's log2-sum-exp: NaN if a split was, -inf if no split
  // saw a key.
  __device__ __forceinline__ float lse2() const {
    return nan ? __int_as_float(0x7fffffff) : (sum > 0.f ? mx + log2f(sum) : NEG_INF);
  }
};

// split_weights: one warp weighs the splits of row r of item, wts[s] =
// 2^(lse_s - max) (0 for a split that saw no key), lane s taking splits s,
// s+32, ... (loads through L2: other blocks wrote them; each LSE is loaded
// once, kept in wts until it is weighed).
__device__ __forceinline__ SplitWeights split_weights(const PagedParams& p, long long item, int r, int lane,
                                                      float* wts) {
  const int S = p.splits;
  const float* lse = p.part_lse + item * S * 8 + r;
  float mx = NEG_INF;
  bool nan = false;
  for (int s = lane; s < S; s += 32) {
    const float x = __ldcg(lse + s * 8);
    wts[s] = x;  // weighed in place below (by this lane)
    mx = fmaxf(mx, x);
    nan = nan || x != x;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  nan = __any_sync(0xffffffffu, nan);
  float sum = 0.f;
  for (int s = lane; s < S; s += 32) {
    const float x = wts[s];
    const float w = x == NEG_INF ? 0.f : exp2f(x - mx);
    wts[s] = w;
    sum += w;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return {sum, mx, nan};
}

// weigh_splits sums wts[s] times columns d..d+3 of split s's partial row
// (part + s·8·D) over s = s0, s0+step, ... < S, SPLIT_LOADS loads in flight
// (16, v15: one trip to L2 for the 16 splits of a B1 decode step; with 8,
// two, and the step 0.1-0.2 us longer).
constexpr int SPLIT_LOADS = 16;
__device__ __forceinline__ float4 weigh_splits(const float* part, const float* wts, int D, int d, int s0, int S,
                                               int step) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll SPLIT_LOADS
  for (int s = s0; s < S; s += step) {
    const float w = wts[s];
    const float4 x = __ldcg((const float4*)(part + (long long)s * 8 * D + d));
    acc.x += w * x.x;
    acc.y += w * x.y;
    acc.z += w * x.z;
    acc.w += w * x.w;
  }
  return acc;
}

// merge_row combines the splits of row r of item (b, kh, rb) with 8 warps
// (warp, lane): warp 0 weighs the row's splits into wts; then warp w sums
// splits w, w+8, ... with four columns a lane (16-byte loads, all in
// flight, through L2: another block may have written them), and the warps'
// sums are added through part_sum. sync is the barrier of the 8 warps; wts,
// part_sum and the two scalars may be reused once merge_row returns.
template <class Sync>
__device__ __forceinline__ void merge_row(const PagedParams& p, int b, int kh, int rb, int r, int warp, int lane,
                                          float* wts, float (*part_sum)[256], float* row_sum, float* row_lse,
                                          Sync sync) {
  const int D = p.d, S = p.splits, group = p.hq / p.hkv, r0 = rb * 8;
  const long long item = ((long long)b * p.hkv + kh) * p.row_blocks + rb;
  if (warp == 0) {
    const SplitWeights w = split_weights(p, item, r, lane, wts);
    if (lane == 0) {
      *row_sum = w.nan ? __int_as_float(0x7fffffff) : w.sum;
      *row_lse = w.lse2();
    }
  }
  sync();
  const float sum = *row_sum;
  const float* part = p.part_out + (item * S * 8 + r) * D;  // split s at part + s·8·D
  for (int d = 4 * lane; d < D; d += 128) {
    *(float4*)&part_sum[warp][d] =
        sum > 0.f ? weigh_splits(part, wts, D, d, warp, S, 8) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  sync();
  const int rr = r0 + r, hh = kh * group + rr % group, ii = rr / group;
  for (int d = warp * 32 + lane; d < D; d += MERGE_THREADS) {
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < 8; w++) acc += part_sum[w][d];
    float val = sum > 0.f ? acc / sum : 0.f;
    if (sum != sum) val = sum;
    p.out[b * p.batch_stride + hh * p.head_stride + ii * p.row_stride + d] = val;
  }
  if (warp == 0 && lane == 0 && p.lse) p.lse[((long long)b * p.hq + hh) * p.sq + ii] = *row_lse * LN2;
}

// Combines the splits of each row: with w_s = 2^(lse_s - max), out = Σ
// w_s·out_s / Σ w_s and lse = max + log2 Σ w_s (natural log on output). A row
// no split saw a key for gets zeros and -inf; a NaN in any split stays NaN.
// Grid (hkv·row_blocks, b, 8 rows), 256 threads: merge_row.
extern "C" __global__ void __launch_bounds__(MERGE_THREADS) fp8attn_paged_merge(const PagedParams p) {
  pdl_entry();
  __shared__ float wts[256];                        // the row's split weights (splits <= 256)
  __shared__ __align__(16) float part_sum[8][256];  // each warp's column sums (D <= 256)
  __shared__ float row_sum, row_lse;
  const int kh = blockIdx.x / p.row_blocks, rb = blockIdx.x % p.row_blocks, b = blockIdx.y, r = blockIdx.z;
  if (r >= min(8, p.hq / p.hkv * p.sq - rb * 8)) return;
  merge_row(p, b, kh, rb, r, threadIdx.x >> 5, threadIdx.x & 31, wts, part_sum, &row_sum, &row_lse,
            [] { __syncthreads(); });
}

// merge_row_warp is merge_row for one warp alone (the warp-specialized
// kernel's last split of an item runs one a row): lane l owns columns 4l..4l+3
// (D <= 128). For each chunk of
// SPLIT_LOADS splits every lane loads the chunk's log-sum-exps and its four
// columns of each split's partial row at once, then, with m the largest
// log-sum-exp so far, scales what it has summed by 2^(m_before - m) and adds
// 2^(lse_s - m)·row_s (a split that saw no key weighs 0); out = Σ / Σ
// weights. Otherwise (v15) lane s weighs splits s, s+32, ... into wts (256
// floats of its own) first, then each lane sums its columns over every
// split.
template <int D>
__device__ __forceinline__ void merge_row_warp(const PagedParams& p, int b, int kh, int rb, int r, int lane,
                                               float* wts) {
  static_assert(D % 4 == 0 && D <= 128, "a lane's four columns cover the row");
  const int S = p.splits, group = p.hq / p.hkv, r0 = rb * 8;
  const long long item = ((long long)b * p.hkv + kh) * p.row_blocks + rb;
  const float* part = p.part_out + (item * S * 8 + r) * D;  // split s at part + s·8·D
  const int rr = r0 + r, hh = kh * group + rr % group, ii = rr / group, d = 4 * lane;
  float* out = p.out + b * p.batch_stride + hh * p.head_stride + ii * p.row_stride;
  (void)wts;
  const float* lse = p.part_lse + item * S * 8 + r;
  float mx = NEG_INF, sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  bool nan = false;
  for (int s0 = 0; s0 < S; s0 += SPLIT_LOADS) {
    float l[SPLIT_LOADS];
    float4 x[SPLIT_LOADS];
#pragma unroll
    for (int j = 0; j < SPLIT_LOADS; j++) {
      const int s = s0 + j;
      l[j] = s < S ? __ldcg(lse + s * 8) : NEG_INF;
      x[j] = s < S && d < D ? __ldcg((const float4*)(part + (long long)s * 8 * D + d)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#ifdef FP8ATTN_PROFILE
    asm volatile("" ::"f"(l[0]), "f"(x[0].x));
    WS_STAMP(r == 0 && lane == 0 && s0 == 0, 13);
#endif
    float m = mx;
#pragma unroll
    for (int j = 0; j < SPLIT_LOADS; j++) {
      m = fmaxf(m, l[j]);  // (fmaxf passes a NaN over)
      nan = nan || l[j] != l[j];
    }
    if (m != mx) {  // m > mx: what was summed against mx (nothing while mx = -inf) scales down
      const float c = mx == NEG_INF ? 0.f : merge_exp2(mx - m);
      sum *= c;
      acc = make_float4(acc.x * c, acc.y * c, acc.z * c, acc.w * c);
      mx = m;
    }
#pragma unroll
    for (int j = 0; j < SPLIT_LOADS; j++) {
      const float w = l[j] == NEG_INF ? 0.f : merge_exp2(l[j] - mx);
      sum += w;
      acc.x += w * x[j].x;
      acc.y += w * x[j].y;
      acc.z += w * x[j].z;
      acc.w += w * x[j].w;
    }
  }
  const SplitWeights sw{sum, mx, nan};
  if (d < D) {
    const float inv = sw.sum > 0.f ? 1.f / sw.sum : 0.f;
    float4 val = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    if (sw.nan) val = make_float4(__int_as_float(0x7fffffff), __int_as_float(0x7fffffff), __int_as_float(0x7fffffff),
                               __int_as_float(0x7fffffff));
    *(float4*)(out + d) = val;
  }
  WS_STAMP(r == 0 && lane == 0, 14);
  if (lane == 0 && p.lse) p.lse[((long long)b * p.hq + hh) * p.sq + ii] = sw.lse2() * LN2;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The warp-specialized kernel's entry fp8attn_paged_wsq_d{D}, which the
// host launches for calls with more units than blocks, passing a ticket,
// has its blocks take their units after the first two from the ticket as
// they get to them (UnitQueue), so that blocks the memory serves faster
// take more; fp8attn_paged_ws_d{D} deals them round robin (unit k of block
// b is b + k·grid).

// UnitQueue hands the units a block takes from the ticket to all of its
// warps. Block b's units are b, b + grid, then 2·grid + t for the tickets t
// it draws (none at or past the call's units), one a unit: producer 0's
// lane 0 draws unit k+2 once it has issued its copies of unit k (if unit
// k+1 exists), and publishes it as publication k; every warp reads
// publication k after unit k (producers before they prefetch unit k+2's
// pages, consumers before unit k+1). Publications go round NS slots: a
// slot's full barrier completes on the publisher's arrival, its empty
// barrier on one arrival from each of the READERS warps, which the
// publisher waits for before it writes the slot again (a producer with no
// tiles in short units could otherwise run NS publications ahead of a
// consumer). A unit's result does not depend on its block (v11), so the
// results do not depend on which block drew which ticket.
template <int NS, int READERS> struct UnitQueue {
  uint64_t full[NS], empty[NS];
  int uid[NS];
  __device__ __forceinline__ void init() {
    for (int s = 0; s < NS; s++) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], READERS);
    }
  }
  // publish (one thread) makes v publication j.
  __device__ __forceinline__ void publish(int j, int v) {
    const int s = j % NS;
    if (j >= NS) hopper::mbar_wait(&empty[s], (j / NS - 1) & 1);
    uid[s] = v;
    hopper::mbar_arrive(&full[s]);
  }
  // read (a whole warp) returns publication j: lane 0 reads the slot and
  // frees it, and passes it on (an mbarrier arrival releases only the
  // arriving thread's own reads: racecheck).
  __device__ __forceinline__ int read(int j, int lane) {
    const int s = j % NS;
    int v = 0;
    if (lane == 0) {
      hopper::mbar_wait(&full[s], (j / NS) & 1);
      v = uid[s];
      hopper::mbar_arrive(&empty[s]);
    }
    return __shfl_sync(0xffffffffu, v, 0);
  }
};

// The warp-specialized kernel (sm_90a build only; internal/tiles.PagedWSConfig):
// one block an SM walks units blockIdx.x, blockIdx.x + gridDim.x, ... Tile
// k of a unit goes to consumer warp k % CW (whatever units came before: a
// unit's result does not depend on the block that ran it), through the
// ring's slots w, w+CW, ... of that warp, in turn: the warp's j-th tile
// over the block's units is slot w + CW·(j % (RING/CW)) in phase
// j / (RING/CW).
//   Producers (warps CONSUMERS.. on, one for each consumer warp, producer
//   pi streaming consumer pi's tiles): the lanes of
//   each work out 32 of its tiles' places at once (page, offset); lane 0
//   then, tile after tile, waits for the slot to be empty, issues 4-byte
//   cp.asyncs of the page's K and V scales into the slot's header and the
//   two bulk copies of its keys and values (32·D contiguous bytes each: the
//   cache's tile layout is the shared-memory one). The slot's full barrier
//   completes when the bytes have landed and the scales' copies arrive
//   (cp.async.mbarrier.arrive.noinc: the barrier counts two arrivals).
//   Consumers: a slot always serves the same warp (RING a multiple of CW),
//   whose 32 lanes free it after each tile, and which has consumed a slot's
//   previous tile before it waits for the next, so a phase parity never
//   aliases; each warp runs its own online softmax for its unit; at a
//   unit's end the consumers merge (named barrier 1) in their own area
//   while the producers stream on into the next unit.
//   Boundaries: each unit's sequence length and first pages are loaded
//   while the unit before it streams (a load issued at the boundary waits
//   behind the memory's queue of copies, microseconds); the copies carry
//   an evict_first L2 policy, so that its queries are found in L2.
//   Registers: the roles are whole warpgroups, and setmaxnreg gives the
//   producers' registers to the consumers (each producer warp serves one
//   consumer warp: with two consumers a producer, a consumer that fell
//   behind held up the other's tiles).
//   Splits: the unit that finishes an item's last split (a counter per
//   item, left 0 again) merges the item's partial rows, so that no merge
//   kernel follows.
// (v10a had one producer lane work out every tile itself, an integer
// division and some 100 instructions a tile: the producer, not the memory,
// set the pace, at 2.6 TB/s on B8 Hq32 Hkv8 Sk8192; with the places worked
// out by the lanes, one producer's 60 instructions a tile still did; four
// producers of two consumers each held one consumer's tiles back behind
// the other's.)
template <int D, class State, bool DYNAMIC>
__device__ __forceinline__ void paged_ws(const PagedParams p) {
  using T = PagedWSTiles<D>;
  constexpr int CW = T::CONSUMERS, R = T::RING, TILE = T::TILE;
  static_assert(T::KEYS == 32 && T::ROWS == 8 && TILE == 64 * D, "32-key tiles of keys and values, 8 rows");
  static_assert(R % CW == 0, "a slot serves one consumer warp");
  constexpr int PW = T::PRODUCERS;
  static_assert(PW == CW && R % CW == 0, "a slot serves one consumer warp and its producer warp");
  static_assert(CW >= 8, "the split merge runs merge_row_warp on a consumer warp a row");
  static_assert(CW % 4 == 0 && PW % 4 == 0 && 32 * (CW * T::CONSUMER_REGS + PW * T::PRODUCER_REGS) <= 65536,
                "whole warpgroups of each role, their registers within the SM's");
  // The merge area: the warps' rows, or merge_row_warp's weights.
  constexpr int SOF = CW * 8 * D > 8 * 256 ? CW * 8 * D : 8 * 256;
  static_assert(T::SMEM == R * TILE + R * 24 + T::MERGE && T::MERGE == SOF * 4 + CW * 17 * 4, "layout");
  extern __shared__ __align__(128) uint8_t ws_smem[];
  uint8_t* ring = ws_smem;
  uint64_t* full = (uint64_t*)(ws_smem + R * TILE);
  uint64_t* empty = full + R;
  float2* scales = (float2*)(empty + R);
  float* so = (float*)(scales + R);  // [CW][8][D], or merge_row_warp's [8][256]
  float(*sm_m)[8] = (float(*)[8])(so + SOF);
  float(*sm_l)[8] = sm_m + CW;
  float* sm_vs = (float*)(sm_l + CW);

  __shared__ UnitQueue<4, CW + PW> queue;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned t_entry = 0;  // (a profile build's entry time, written after pdl_wait)
  PROFILE_CLOCK(t_entry);
  const PagedDivs dv(p);  // from the parameters alone: before pdl_wait, beside the kernel before
  if (threadIdx.x == 0) {
    for (int s = 0; s < R; s++) {
      hopper::mbar_init(&full[s], 2);   // the producer's arrival with the bytes, and its scales' cp.asyncs
      hopper::mbar_init(&empty[s], 32);  // every lane of the consuming warp
    }
    if (DYNAMIC) queue.init();
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int units = p.b * p.hkv * p.row_blocks * p.splits;
  const long long blk_bytes = (long long)D * p.page_size;
  // The block's k-th unit (UnitQueue, where DYNAMIC: the entry point's
  // choice, where the host passed a ticket); from k = 2 on, a warp reads
  // each publication once, in order.
  constexpr bool dynamic = DYNAMIC;
  auto unit_at = [&](int k) -> int {
    return k < 2 || !dynamic ? blockIdx.x + k * gridDim.x : queue.read(k - 2, lane);
  };

  // A consumer warp's slots: w, w + CW, ..., PER of them. The host uses
  // fewer than the ring holds where a block has one unit (ws_slots):
  // fewer bytes in flight, less waiting in the memory's queues; a block
  // with several units wants the whole ring to cover its pauses between them.
  const int PER = max(1, min(R, p.ws_slots) / CW);
  if (warp >= CW) {  // a producer: consumer warp pi's tiles (a unit's tiles k = pi, pi+PW, ...)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::PRODUCER_REGS) : "memory");
    WS_STAMP(warp == CW && lane == 0, 10);
    const int pi = warp - CW;
    const int table_tiles = p.pages_per_seq * (p.page_size / 32);  // a block-table row's tiles
    // first loads what unit uid's first batch needs: its sequence's length
    // and the pages of this producer's first 32 tiles (lane l: tile pi +
    // PW·l from the split's start; an entry past the sequence is read,
    // within the table's row, and not used). Each unit's are loaded while
    // the one before streams: a load at the boundary would wait behind the
    // memory's queue of copies.
    auto first = [&](int uid, int& n, int& pg) {
      n = pg = 0;
      if (uid >= units) return;
      const int b = paged_unit_seq(dv, uid), t0 = dv.splits.mod(uid) * p.tiles_per_split + pi + PW * lane;
      n = p.seq_lens[b];
      if (t0 < table_tiles) pg = p.block_table[(long long)b * p.pages_per_seq + dv.page.div(t0 * 32)];
    };
    int n_cur, pg_cur, done = 0;  // done: this producer's tiles so far
    // (Everything up to the first copy reads
    // only the lengths and the block table: pdl_wait comes just before it,
    // or before the return of a producer that has no tiles.)
    bool waited = false;
    first(blockIdx.x, n_cur, pg_cur);
#ifdef FP8ATTN_PROFILE
    asm volatile("" ::"r"(n_cur), "r"(pg_cur));  // the loads have returned
    WS_STAMP(warp == CW && lane == 0, 11);
#endif
    const int G = gridDim.x;
    int uid = blockIdx.x, unext = blockIdx.x + G;
    for (int ku = 0; uid < units; ku++) {  // the block's ku-th unit
      int n_next, pg_next;
      first(unext, n_next, pg_next);
      const PagedUnit u = paged_unit_at(p, dv, uid, n_cur);
      const int count = max(0, u.tb - u.ta);
      const int* table = p.block_table + (long long)u.b * p.pages_per_seq;
      int pg = pg_cur;
      // Batches of 32 of this producer's tiles: lane l works out tile
      // k0 + PW·l's place (and loads the next batch's page), then lane 0
      // issues them in order.
      for (int k0 = pi; k0 < count; k0 += 32 * PW) {
        const int k = k0 + PW * lane, kn = k + 32 * PW;
        const int pg_after = kn < count ? table[dv.page.div((u.ta + kn) * 32)] : 0;
        long long off = 0;
        int blk = 0;
        if (k < count) {
          blk = pg * p.hkv + u.kh;
          off = blk * blk_bytes + (long long)dv.page.mod((u.ta + k) * 32) * D;
        }
        const int cnt = min(32, (count - k0 + PW - 1) / PW);
        for (int j = 0; j < cnt; j++) {
          const long long offj = __shfl_sync(0xffffffffu, off, j);
          const int blkj = __shfl_sync(0xffffffffu, blk, j);
#ifdef FP8ATTN_PROFILE
          asm volatile("" ::"l"(offj), "r"(blkj));
          WS_STAMP(pi == 0 && lane == 0 && done + j == 0, 12);
#endif
          if (!waited) {  // the warp's first copy: the scales and tiles an append before may have written
            pdl_wait();
            waited = true;
          }
          if (lane == 0) {
            const int at = done + j, slot = pi + CW * (at % PER), phase = at / PER & 1;
            if (at >= PER) hopper::mbar_wait(&empty[slot], phase ^ 1);  // its previous tile consumed
            const uint32_t sc = hopper::smem_u32(&scales[slot]);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sc), "l"(p.k_scale + blkj) : "memory");
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sc + 4), "l"(p.v_scale + blkj) : "memory");
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(hopper::smem_u32(&full[slot]))
                         : "memory");
            hopper::mbar_expect_tx(&full[slot], TILE);
            const uint64_t pol = hopper::evict_first_policy();
            hopper::bulk_load_hinted(ring + slot * TILE, p.k + offj, 32 * D, &full[slot], pol);
            hopper::bulk_load_hinted(ring + slot * TILE + 32 * D, p.v + offj, 32 * D, &full[slot], pol);
            WS_STAMP(pi == 0 && at == 0, 2);
          }
          __syncwarp();
        }
        done += cnt;
        pg = pg_after;
      }
      if (dynamic && pi == 0 && unext < units) {  // unit ku+2 drawn (after pdl_wait: the launch before reset the counter)
        if (!waited) {
          pdl_wait();
          waited = true;
        }
        if (lane == 0) {
          // The tickets a launch hands out: every block whose second unit
          // exists draws until it draws one past the units; the last of
          // them resets the counter for the next launch.
          const int tickets = max(0, units - 2 * G) + min(G, max(0, units - G));
          const int tk = atomicAdd(p.ticket, 1);
          if (tk == tickets - 1) atomicExch(p.ticket, 0);  // every ticket of the launch drawn
          queue.publish(ku, 2 * G + tk);
        }
        __syncwarp();
      }
      n_cur = n_next;
      pg_cur = pg_next;
      uid = unext;
      if (uid < units) unext = unit_at(ku + 2);
    }
    if (!waited) pdl_wait();  // (pdl.cuh: before any return)
    if (lane == 0) asm volatile("cp.async.wait_all;\n" ::: "memory");
    return;
  }

  // The consumers. Lane l names shared row l of the tile for ldmatrix: key
  // key_of_row(l), whose chunks are swizzled by k_swizzle. Warp w takes a
  // unit's tiles w, w+CW, ..., whatever units came before, so that a unit's
  // result does not depend on the block that ran it.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::CONSUMER_REGS) : "memory");
  const int g = lane >> 2, t = lane & 3, kl = key_of_row(lane);
  const int krow = kl * D, ksw = k_swizzle(kl, D / 16);
  auto sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(CW * 32) : "memory"); };
  __shared__ int last_split;
  State st;
  // The next unit's sequence length loads while this one's tiles stream.
  // (Its queries too, held in registers, made ptxas spill at D = 128: the
  // consumer code already uses most of the registers setmaxnreg gives it,
  // about 200. Loaded at the boundary, they come from L2, where the cache's
  // evict_first copies leave them.)
  int uid = blockIdx.x, unext = blockIdx.x + gridDim.x;
  int n_cur = uid < units ? p.seq_lens[paged_unit_seq(dv, uid)] : 0, done = 0;  // done: this warp's tiles so far
  pdl_wait();  // before the queries (a kernel before may write them)
  WS_STAMP(threadIdx.x == 0, 1);
  PROFILE_VALUE(threadIdx.x == 0, 0, 0, 0, t_entry);
  (void)t_entry;
  for (int ku = 0; uid < units; ku++) {  // the block's ku-th unit
    const PagedUnit u = paged_unit_at(p, dv, uid, n_cur);
    st.start(p, u, g, t);
    WS_STAMP(warp == 0 && lane == 0 && done == 0, 15);
    const int n_next = unext < units ? p.seq_lens[paged_unit_seq(dv, unext)] : 0;
    const int count = max(0, u.tb - u.ta);
    for (int k = warp; k < count; k += CW, done++) {
      const int slot = warp + CW * (done % PER);
      hopper::mbar_wait(&full[slot], done / PER & 1);
      WS_STAMP(warp == 0 && lane == 0 && done == 0, 3);
      const float2 sc = scales[slot];
      const uint8_t* sk = ring + slot * TILE;
      st.tile(sk + krow, ksw, sk + 32 * D, sc.x, sc.y, (u.ta + k) * 32, lane, t);
      // Every lane releases its own reads of the slot (an arrival releases
      // only the arriving thread's accesses: with lane 0 alone arriving
      // after a __syncwarp, racecheck reported the next copies into the
      // slot racing the other lanes' reads).
      hopper::mbar_arrive(&empty[slot]);
    }
    n_cur = n_next;
    PROFILE_ONLY(sync());  // every warp's last tile done (merge_warps starts with this barrier)
    WS_STAMP(warp == 0 && lane == 0, 4);
    st.finish();
    WS_STAMP(warp == 0 && lane == 0, 20);
    merge_warps<D, D, CW, true>(p, u, st, so, sm_m, sm_l, sm_vs, warp, lane, sync);
    WS_STAMP(warp == 0 && lane == 0, 5);
    if (p.splits > 1) {
      // The last of the item's splits to get here merges them. The barrier
      // orders every consumer's partial rows before thread 0's add, whose
      // release makes them visible at GPU scope (PTX fences are
      // cumulative); the merging block's add acquires the other splits',
      // and the barrier after it passes them on to its warps. (CUTLASS's
      // GenericBarrier does the same; a __threadfence in every thread
      // before the add and after it cost 0.5-1 us at the end of a call.)
      sync();
      const long long item = ((long long)u.b * p.hkv + u.kh) * p.row_blocks + u.rb;
      if (warp == 0 && lane == 0) {
        int before;
        asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(&p.counters[item]) : "memory");
        last_split = before == p.splits - 1;
        if (last_split) p.counters[item] = 0;  // for the next launch
      }
      sync();
      WS_STAMP(warp == 0 && lane == 0, 6);
      if (last_split) {
        if (warp < u.rows_n) merge_row_warp<D>(p, u.b, u.kh, u.rb, warp, lane, so + 256 * warp);
      }
      PROFILE_VALUE(warp == 0 && lane == 0, 0, 0, 8, last_split);
    }
    WS_STAMP(warp == 0 && lane == 0, 7);
    PROFILE_VALUE(warp == 0 && lane == 0, 0, 0, 9, profile::sm());
    uid = unext;
    if (uid < units) unext = unit_at(ku + 2);
  }
}
#endif

// Entry points fp8attn_paged_d{D}, and each one's geometry for the loader's
// check against internal/tiles: ROWS, KEYS, WARPS, RING, SMEM.
#define FP8ATTN_PAGED_ENTRY(D)                                                                                 \
  extern "C" __global__ void __launch_bounds__(PagedTiles<D>::WARPS * 32) fp8attn_paged_d##D(const PagedParams p) { \
    pdl_entry();                                                                                               \
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

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// Entry points fp8attn_paged_ws_d{D} (sm_90a build), and each one's
// geometry for the loader's check: ROWS, KEYS, CONSUMERS, PRODUCERS, RING, SMEM.
#define FP8ATTN_PAGED_WS_ENTRY(D)                                                                           \
  extern "C" __global__ void __launch_bounds__((PagedWSTiles<D>::CONSUMERS + PagedWSTiles<D>::PRODUCERS) * 32, 1) \
      fp8attn_paged_ws_d##D(const PagedParams p) {                                                          \
    pdl_launch_dependents(); /* paged_ws waits after its barriers' set-up */                              \
    if (p.hq / p.hkv * p.sq <= 4)                                                     \
      paged_ws<D, PagedWarpT<D>, false>(p);                                                                 \
    else                                                                                                    \
      paged_ws<D, PagedWarp<D>, false>(p);                                                                  \
  }                                                                                                         \
  /* the same with units drawn from p.ticket (UnitQueue), its own kernel so */                              \
  /* that the round robin's code is what it was */                                                          \
  extern "C" __global__ void __launch_bounds__((PagedWSTiles<D>::CONSUMERS + PagedWSTiles<D>::PRODUCERS) * 32, 1) \
      fp8attn_paged_wsq_d##D(const PagedParams p) {                                                         \
    pdl_launch_dependents();                                                                                \
    if (p.hq / p.hkv * p.sq <= 4)                                                     \
      paged_ws<D, PagedWarpT<D>, true>(p);                                              \
    else                                                                                                    \
      paged_ws<D, PagedWarp<D>, true>(p);                                               \
  }                                                                                                         \
  extern "C" __device__ const int fp8attn_paged_ws_d##D##_config[] = {                                      \
      PagedWSTiles<D>::ROWS, PagedWSTiles<D>::KEYS, PagedWSTiles<D>::CONSUMERS, PagedWSTiles<D>::PRODUCERS, \
      PagedWSTiles<D>::RING,                                                                                \
      PagedWSTiles<D>::SMEM};
FP8ATTN_PAGED_WS_ENTRY(32)
FP8ATTN_PAGED_WS_ENTRY(64)
FP8ATTN_PAGED_WS_ENTRY(80)
FP8ATTN_PAGED_WS_ENTRY(96)
FP8ATTN_PAGED_WS_ENTRY(128)
#endif
