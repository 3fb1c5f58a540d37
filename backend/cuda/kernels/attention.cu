// attention.cu: FP8 E4M3 scaled-dot-product attention kernels, kept side by
// side as numbered stages (each complete and validated; later stages faster).
//
//   stage 1  FP8 K/V tiles in shared memory through a 2-deep cp.async ring,
//            decoded through a 256-entry table; scalar float32 math, S and P
//            in shared memory. The GPU baseline.
//   stage 2  stage 1 + tensor cores: WMMA m16n16k16 (f16 in, f32 out) for Q·Kᵀ
//            and P·V. S, P and the running output O go through shared memory;
//            four warps share every step of a 16-row block (S tiles, the
//            softmax 8 threads per row, O tiles).
//   stage 3  online softmax fused in registers on the accumulator fragments,
//            using the layout verified on hardware (package wmma, docs/WMMA.md):
//            row max and row sum through quad shuffles, O rescaled in
//            registers, P handed to P·V register to register (the f16
//            matrix_a fragment holds the accumulator's positions).
//   stage 4  stage 3 with a 3-deep cp.async ring for K/V.
//   stage 5  the keys of a 16-row query tile split across KS warps of the
//            block (each its own online softmax over every KS-th tile and its
//            own cp.async ring, no block barrier in the loop), merged through
//            shared memory at the end; Q, K and V fragments filled straight
//            from the FP8 tiles through the hardware-verified matrix_a and
//            matrix_b layouts (no f16 decode pass); masks only on the tiles
//            that need them.
//   stage 6  stage 5 with twice the key-split warps (8 for D=64, 4 for D=128),
//            1-slot rings so the rings still fit 48 KB, and K read two bytes
//            at a time.
//   stage 7  stage 6 with Q·Kᵀ on the FP8 tensor cores (mma.sync m16n8k32
//            e4m3, sm_89+): Q and K fragments are plain 32-bit loads of FP8
//            bytes, no conversion; the f32 C fragments become P's f16
//            matrix_a fragments register for register.
//   stage 8  stage 7 with V decoded to f16 per 16-key half tile (into the
//            warp's K slot, free after Q·Kᵀ) and its B fragments loaded by
//            ldmatrix.x4.trans instead of byte-wise fills.
//   (stage 9 is the Hopper kernel, a module of its own: attention_sm90a.cu.)
//   stage 10 the Ada kernel (ada.cuh): FlashAttention-2's structure with
//            both GEMMs on mma.sync m16n8k32 e4m3: four warps of 16 rows
//            (query heads of one KV head packed with positions) share
//            64-key tiles (32 for D=256) in a 2-3 deep cp.async ring in
//            dynamic shared memory; K and V fragments by ldmatrix; V from
//            an image the pack kernel writes transposed, keys in sigma
//            order, so P goes from accumulators to A fragments by
//            conversions; P scaled by 2^8 before its E4M3 cast. D in
//            {64, 96, 128, 256}. Sliding windows and softcaps (in twin
//            entry points) and sinks, as stage 9.
//
// Ampere: the stages that decode FP8 to f16 before the MMA (1-6) are also
// built for compute_80 (attention_compute_80.ptx, loaded on sm_80-sm_88);
// stages 7, 8 and 10 use FP8 mma.sync, which needs sm_89, and are left out
// of that build (the sm_89 guards below).
//
// Files: common.cuh (shared helpers, Params), ladder/ (stages 1-8, the
// frozen progression: docs/design/ladder.md), ada.cuh (stage 10:
// docs/design/ada-prefill.md); tiles.h is generated (go run
// ./internal/tiles/gen). The Hopper kernel (stage 9) is hopper.cuh and
// hopper/, built from attention_sm90a.cu into a module of its own.
//
// Conventions: Q, K, V are E4M3 codes, [B][H][S][D] with int64 strides in
// Params; per-(batch, head) dequantization scales; the Q and K scales and
// log2(e) are folded into the softmax scale, the V scale into the output.
// Scores are kept in the log2 domain (exp2); LSE is returned in natural log.
// A row that sees no key gets zeros and LSE -Inf. NaN propagates as the
// conformance suite's NaN rule states (package sdpatest): masked weights are
// exactly 0 and P·V multiplies them by every V row of the tiles a block
// loads, so a NaN in V reaches the rows of the block that load its key.
#include "common.cuh"
#include "ladder/stage1.cuh"
#include "ladder/stage2.cuh"
#include "ladder/stage3_4.cuh"
#include "ladder/stage5_8.cuh"

// FP8 mma.sync (sm_89+): every build but the compute_80 one has it (the
// stages 7, 8 and 10 below are under the same guard).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#include "ada.cuh"
#endif

// ---------------------------------------------------------------------------
// Entry points: one per (stage, D), each with its geometry from tiles.h
// exported as <name>_config = {BM, BN, THREADS, RING}, which the Go side
// checks against internal/tiles when the module loads.
// ---------------------------------------------------------------------------
#define ENTRY(S, D, FN)                                                                                  \
  extern "C" __global__ void __launch_bounds__(Tiles<S, D>::THREADS)                                     \
      fp8attn_stage##S##_d##D(const __grid_constant__ Params p) { FN; }                                   \
  extern "C" __device__ const int fp8attn_stage##S##_d##D##_config[4] = {Tiles<S, D>::BM, Tiles<S, D>::BN, \
                                                                          Tiles<S, D>::THREADS, Tiles<S, D>::RING};
ENTRY(1, 64, stage1<64>(p)) ENTRY(1, 128, stage1<128>(p))
ENTRY(2, 64, stage2<64>(p)) ENTRY(2, 128, stage2<128>(p))
ENTRY(3, 64, (stage_wmma<64, 3>(p))) ENTRY(3, 128, (stage_wmma<128, 3>(p)))
ENTRY(4, 64, (stage_wmma<64, 4>(p))) ENTRY(4, 128, (stage_wmma<128, 4>(p)))
ENTRY(5, 64, (stage5<64, 5>(p))) ENTRY(5, 128, (stage5<128, 5>(p)))
ENTRY(6, 64, (stage5<64, 6>(p))) ENTRY(6, 128, (stage5<128, 6>(p)))
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
ENTRY(7, 64, (stage5<64, 7>(p))) ENTRY(7, 128, (stage5<128, 7>(p)))
ENTRY(8, 64, (stage5<64, 8>(p))) ENTRY(8, 128, (stage5<128, 8>(p)))
#endif
static_assert(FP8ATTN_NUM_STAGES == 8, "tiles.h lists stages without entry points here");

// The Ada kernel (stage 10) per head dim: the attention kernel (dynamic
// shared memory AdaTiles<D>::SMEM) and its twins of the same geometry,
// fp8attn_stage10w_d<D> (ada::stage10 with WINDOW, for the calls with a
// sliding window) and fp8attn_stage10c_d<D> (with WINDOW and SOFTCAP, for
// the calls with a softcap), so that the plain kernel keeps its main loop;
// the geometry exported as fp8attn_stage10_d<D>_config = {D, BM, BN,
// WARPS, RING, KPITCH, VPITCH, SMEM} (checked against internal/tiles when
// the module loads); and the V image pack kernel.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define ADA_ENTRY(HD)                                                                                          \
  extern "C" __global__ void __launch_bounds__(AdaTiles<HD>::WARPS * 32)                                        \
      fp8attn_stage10_d##HD(const __grid_constant__ Params p) {                                                  \
    ada::stage10<HD>(p);                                                                                         \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(AdaTiles<HD>::WARPS * 32)                                        \
      fp8attn_stage10w_d##HD(const __grid_constant__ Params p) {                                                 \
    ada::stage10<HD, true>(p);                                                                                   \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(AdaTiles<HD>::WARPS * 32)                                        \
      fp8attn_stage10c_d##HD(const __grid_constant__ Params p) {                                                 \
    ada::stage10<HD, true, true>(p);                                                                             \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) fp8attn_pack10v_d##HD(const __grid_constant__ Params p) {    \
    ada::pack_v<HD>(p);                                                                                          \
  }                                                                                                             \
  extern "C" __device__ const int fp8attn_stage10_d##HD##_config[8] = {                                          \
      AdaTiles<HD>::D,    AdaTiles<HD>::BM,     AdaTiles<HD>::BN,     AdaTiles<HD>::WARPS,                         \
      AdaTiles<HD>::RING, AdaTiles<HD>::KPITCH, AdaTiles<HD>::VPITCH, AdaTiles<HD>::SMEM};
ADA_ENTRY(64)
ADA_ENTRY(96)
ADA_ENTRY(128)
ADA_ENTRY(256)
#endif

// The layout of Params as this compiler lays it out (common.cuh).
FP8ATTN_EXPORT_PARAMS_LAYOUT

// Quantization on the device (quant.cuh), every build, with the layouts of
// its two parameter blocks.
#include "quant.cuh"
extern "C" __global__ void __launch_bounds__(256) fp8attn_quant_amax(const __grid_constant__ QuantParams p) { quant_amax<1>(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_quant_amax4(const __grid_constant__ QuantParams p) { quant_amax<4>(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_quant_encode(const __grid_constant__ QuantParams p) { quant_encode<1>(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_quant_encode4(const __grid_constant__ QuantParams p) { quant_encode<4>(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_quant_iota(const __grid_constant__ QuantParams p) { quant_iota(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_score_factors(const __grid_constant__ ScoreParams p) { score_factors(p); }
// QuantParams: sizeof, the offsets of t[0], t[1], amax, done, n, rows,
// iota_base; then QuantTensor: sizeof and its fields' offsets.
extern "C" __device__ const int fp8attn_quant_params_layout[] = {
    (int)sizeof(QuantParams),          FP8ATTN_QUANT_PARAMS_OFF(t[0]),          FP8ATTN_QUANT_PARAMS_OFF(t[1]),
    FP8ATTN_QUANT_PARAMS_OFF(amax),    FP8ATTN_QUANT_PARAMS_OFF(done),          FP8ATTN_QUANT_PARAMS_OFF(n),
    FP8ATTN_QUANT_PARAMS_OFF(rows),    FP8ATTN_QUANT_PARAMS_OFF(iota_base),
    (int)sizeof(QuantTensor),          FP8ATTN_QUANT_TENSOR_OFF(src),           FP8ATTN_QUANT_TENSOR_OFF(codes),
    FP8ATTN_QUANT_TENSOR_OFF(scales),  FP8ATTN_QUANT_TENSOR_OFF(batch_stride),  FP8ATTN_QUANT_TENSOR_OFF(head_stride),
    FP8ATTN_QUANT_TENSOR_OFF(row_stride), FP8ATTN_QUANT_TENSOR_OFF(b),          FP8ATTN_QUANT_TENSOR_OFF(h),
    FP8ATTN_QUANT_TENSOR_OFF(s),       FP8ATTN_QUANT_TENSOR_OFF(d)};
// The output of a call on host slices, in float16 for the way down
// (half.cuh), with the layout of its parameter block: sizeof, the offsets
// of x, y, n, factor.
#include "half.cuh"
extern "C" __global__ void __launch_bounds__(256) fp8attn_out_half(const __grid_constant__ HalfParams p) { out_half(p); }
extern "C" __device__ const int fp8attn_half_params_layout[] = {
    (int)sizeof(HalfParams), (int)offsetof(HalfParams, x), (int)offsetof(HalfParams, y), (int)offsetof(HalfParams, n),
    (int)offsetof(HalfParams, factor)};
extern "C" __global__ void __launch_bounds__(1024) fp8attn_smooth_k(const __grid_constant__ TransformParams p) { smooth_k(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_rotate(const __grid_constant__ TransformParams p) { rotate(p); }
extern "C" __global__ void __launch_bounds__(256) fp8attn_correct_lse(const __grid_constant__ TransformParams p) { correct_lse(p); }
#define FP8ATTN_TRANSFORM_PARAMS_OFF(f) (int)offsetof(TransformParams, f)
extern "C" __device__ const int fp8attn_transform_params_layout[] = {
    (int)sizeof(TransformParams),            FP8ATTN_TRANSFORM_PARAMS_OFF(x),            FP8ATTN_TRANSFORM_PARAMS_OFF(q),
    FP8ATTN_TRANSFORM_PARAMS_OFF(lse),       FP8ATTN_TRANSFORM_PARAMS_OFF(means),        FP8ATTN_TRANSFORM_PARAMS_OFF(signs),
    FP8ATTN_TRANSFORM_PARAMS_OFF(batch_stride), FP8ATTN_TRANSFORM_PARAMS_OFF(head_stride), FP8ATTN_TRANSFORM_PARAMS_OFF(row_stride),
    FP8ATTN_TRANSFORM_PARAMS_OFF(b),         FP8ATTN_TRANSFORM_PARAMS_OFF(h),            FP8ATTN_TRANSFORM_PARAMS_OFF(s),
    FP8ATTN_TRANSFORM_PARAMS_OFF(d),         FP8ATTN_TRANSFORM_PARAMS_OFF(group),        FP8ATTN_TRANSFORM_PARAMS_OFF(n),
    FP8ATTN_TRANSFORM_PARAMS_OFF(norm),      FP8ATTN_TRANSFORM_PARAMS_OFF(scale)};
extern "C" __device__ const int fp8attn_score_params_layout[] = {
    (int)sizeof(ScoreParams),          FP8ATTN_SCORE_PARAMS_OFF(q_scale), FP8ATTN_SCORE_PARAMS_OFF(k_scale),
    FP8ATTN_SCORE_PARAMS_OFF(score_scale), FP8ATTN_SCORE_PARAMS_OFF(bad), FP8ATTN_SCORE_PARAMS_OFF(scale),
    FP8ATTN_SCORE_PARAMS_OFF(limit),   FP8ATTN_SCORE_PARAMS_OFF(b),       FP8ATTN_SCORE_PARAMS_OFF(hq),
    FP8ATTN_SCORE_PARAMS_OFF(hkv)};
