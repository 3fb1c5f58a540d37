// hopper.cuh: stage 9, the Hopper kernel (sm_90a), and the pack kernels that
// lay its inputs out on the device. Included by attention_sm90a.cu only.
//
// Design (FlashAttention-3's, reduced to what this library needs):
//
//   * Shared memory as the wgmma operands want it (K-major, swizzled;
//     wmma.KMajorOffset, verified on the H200), reached two ways. The image
//     forms read "images" the pack kernels write: tiles stored contiguously,
//     each byte already where it goes in shared memory, so that one bulk
//     copy (cp.async.bulk, the tensor-memory accelerator's 1-D mode) moves
//     a whole tile, completing on an mbarrier. The tensor form
//     (hopper/tensors.cuh) reads the caller's FP8 tensors where they are,
//     through tensor maps the host encodes per call (cuTensorMapEncodeTiled
//     resolved at run time, the CUtensorMap declared by hand: the CUDA 11.8
//     headers the pinned gorgonia.org/cu build uses lack both), the copy
//     engine swizzling Q and K; V, transposed, goes through an image the
//     tiled form's pack writes each call, or is transposed by the one-tile
//     form itself. The layouts in shared memory (and in the images):
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
//     (promotion, below), in column parts where one accumulator of D/2
//     registers beside O would spill (HopperTiles<D>::PV_PARTS); beside it
//     P times a block of ones (m64n8k32) sums the rounded weights the
//     output is normalized by (the normalizer, below).
//   * Overlap: within a warpgroup, Q·K(t)ᵀ and P(t-1)·V(t-1) are
//     issued together and the softmax of tile t (and its packing into a
//     second set of P registers; at D 64 into the same set, after P·V,
//     ONE_PA) runs while P·V is on the tensor cores. Ping-pong between the
//     consumer warpgroups (they take turns to issue their GEMMs) at D 128
//     (the wide form, the fused one excepted but for its key split,
//     stage9fs, which takes the tensor form's turns), 192 and 256
//     (PINGPONG, FUSED_PINGPONG for the fused form); at D 64 they take
//     turns to run their softmaxes instead (SOFTMAX_TURNS). The schedule per head
//     dim, and why, is internal/tiles' HopperConfig
//     (docs/design/hopper-prefill.md).
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
#include "paged/rescale.cuh"  // rescale16: the paged form's re-encoding of a tile's smaller page

// The schedule (ping-pong, softmax turns, one P set, P·V's column parts,
// the fused form's ping-pong) is data: internal/tiles' HopperConfig, generated into tiles.h as
// HopperTiles<D>::PINGPONG, FUSED_PINGPONG, SOFTMAX_TURNS, ONE_PA and
// PV_PARTS.
//
// Promotion: each tile's P·V runs into a zeroed accumulator and is added
// to O in float32 (DeepSeek-V3's promotion, their §3.3.2), in column parts
// where the registers ask for it. The tensor cores truncate each k32 step's
// sum relative to its largest term (internal/fp8mma); accumulated across
// tiles in one running wgmma accumulator, every new product would be
// truncated relative to the whole row so far, and on values of one sign
// the losses add up: 7% at 4096 keys (docs/ACCURACY.md).
//
// The normalizer: each row is divided by the sum of the E4M3 weights the
// tensor cores multiplied, computed by them (P times a block of ones,
// wgmma m64n8k32, beside P·V), instead of the float32 sum of the unrounded
// weights: then the output is a weighted mean of V's rows and rounding P
// moves it by at most 2^-4 of V's range, not of its magnitude (values of
// one sign lost up to 1.6x the input-quantization error without it). The
// float32 sum still gives the LSE.
//
// Files, in the order included (inside namespace hopper): hopper/wgmma.cuh
// (warpgroup primitives), pack.cuh (the images and their pack kernels),
// quant_pack.cuh (quant_pack9), one_tile_quantize.cuh (the quantizing
// one-tile form's quantization), shell.cuh (the producer's copies and the
// epilogue), tensors.cuh (the tensor form's producer), paged.cuh (the paged
// form's producer), split.cuh (the key
// split's parts and their merge), softmax.cuh (a
// tile's softmax and P's packing), mainloop.cuh (a consumer warpgroup's
// steps, the one-tile form and the tiled main loop), packed.cuh (the
// packed form's rows), packed_decode.cuh (its items of a decode token's
// rows, the GEMMs' operands swapped) and attention.cuh (stage9: the block's set-up, the producer
// warpgroup, a consumer's set-up, its form and the epilogue).

namespace hopper {

#include "hopper/wgmma.cuh"
#include "hopper/pack.cuh"
#include "hopper/quant_pack.cuh"
#include "hopper/one_tile_quantize.cuh"
#include "hopper/shell.cuh"
#include "hopper/tensors.cuh"
#include "hopper/paged.cuh"
#include "hopper/split.cuh"
#include "hopper/softmax.cuh"
#include "hopper/mainloop.cuh"
#include "hopper/packed.cuh"
#include "hopper/packed_decode.cuh"
#include "hopper/attention.cuh"

}  // namespace hopper
