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

#include "paged/params.cuh"
#include "paged/check.cuh"
#include "paged/append.cuh"
#include "paged/warp.cuh"
#include "paged/merge_warps.cuh"
#include "paged/attention.cuh"
#include "paged/merge_splits.cuh"
#include "paged/ws.cuh"

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
