// paged.cu: the paged FP8 KV cache on the GPU. A module of its
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
//   fp8attn_paged_prefill_inputs  quantizes a chunk of queries and lays
//                          the cache of a batch of sequences out as plain
//                          FP8 tensors, one scale per
//                          (sequence, KV head): the chunk then runs on the
//                          prefill kernels.
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
// Variants (PagedParams.window, softcap, sinks; docs/design/paged-decode.md):
// under a sliding window a unit's splits start at the tile of its first
// row's lowest key (window_lo) and each row masks its own keys (RowKeys);
// a softcap caps each score before the mask (softcap_score, the tile loop
// built with it apart from the plain loop); a sink joins the row's final
// denominator once: merge_warps with one split, the split merges otherwise.
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
#include "bulk.cuh"    // mbarriers, bulk copies (the warp-specialized kernel)
#include "pdl.cuh"     // programmatic dependent launch: every entry point keeps its contract
#include "profile.cuh"  // timelines (-DFP8ATTN_PROFILE builds only)

#include "common.cuh"  // NEG_INF, LN2, cp.async, E4M3 decoding; tiles.h

#include "paged/params.cuh"
#include "paged/rescale.cuh"  // float_to_e4m3; codes re-encoded at another scale
#include "paged/check.cuh"
#include "paged/append.cuh"
#include "quant.cuh"  // the queries' encode (Memory.Quantize's)
#include "paged/prefill_inputs.cuh"
#include "paged/warp.cuh"
#include "paged/merge_warps.cuh"
#include "paged/attention.cuh"
#include "paged/merge_splits.cuh"
#include "paged/ws.cuh"

// Entry points fp8attn_paged_d{D}, their softcap twins fp8attn_pagedc_d{D}
// (the tile loop with the softcap: in one kernel with the plain loop, the
// larger head dims' kernels spilled), and each one's geometry for the
// loader's check against internal/tiles: ROWS, KEYS, WARPS, RING, SMEM.
#define FP8ATTN_PAGED_ENTRY(D)                                                                                 \
  extern "C" __global__ void __launch_bounds__(PagedTiles<D>::WARPS * 32) fp8attn_paged_d##D(const PagedParams p) { \
    pdl_entry();                                                                                               \
    paged_attention<D, false>(p);                                                                              \
  }                                                                                                            \
  extern "C" __global__ void __launch_bounds__(PagedTiles<D>::WARPS * 32) fp8attn_pagedc_d##D(const PagedParams p) { \
    pdl_entry();                                                                                               \
    paged_attention<D, true>(p);                                                                               \
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
    if (p.hq / p.hkv * p.sq <= PagedWSTiles<D>::T_ROWS)                                                     \
      paged_ws<D, PagedWarpT<D>, false>(p);                                                                 \
    else                                                                                                    \
      paged_ws<D, PagedWarp<D>, false>(p);                                                                  \
  }                                                                                                         \
  /* the same with units drawn from p.ticket (UnitQueue), its own kernel so */                              \
  /* that the round robin's code is what it was */                                                          \
  extern "C" __global__ void __launch_bounds__((PagedWSTiles<D>::CONSUMERS + PagedWSTiles<D>::PRODUCERS) * 32, 1) \
      fp8attn_paged_wsq_d##D(const PagedParams p) {                                                         \
    pdl_launch_dependents();                                                                                \
    if (p.hq / p.hkv * p.sq <= PagedWSTiles<D>::T_ROWS)                                 \
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
