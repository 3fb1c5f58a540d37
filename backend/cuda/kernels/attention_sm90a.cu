// attention_sm90a.cu: the Hopper module (sm_90a), built by gen.sh into
// attention_sm_90a.cubin (and its PTX), which the cuda backend loads on
// compute capability 9.0 only.
//
//   stage 9  warp-specialized: a producer warpgroup moves pre-packed,
//            swizzled K/V tiles into a shared-memory ring with bulk copies
//            (the tensor-memory accelerator), two consumer warpgroups of 64
//            query rows run Q·Kᵀ and P·V on wgmma e4m3 (QGMMA), P from
//            registers, the online softmax overlapped with the GEMMs. The
//            pack kernels lay Q, K and V out for it on the device. See
//            hopper.cuh and docs/design/hopper-prefill.md.
#include "common.cuh"
#include "hopper.cuh"

// Entry points per head dim: the attention kernel, its fused form (float32
// inputs quantized by quant_pack9 just before: the score factors from their
// scales), its tensor form (the caller's FP8 tensors through tensor maps,
// hopper/tensors.cuh: no pack kernels, the score factors from the scales),
// its geometry exported as fp8attn_stage9_d<D>_config = {D, DK, BM, BN, THREADS, RING, SMEM}
// followed by its schedule {PINGPONG, SOFTMAX_TURNS, ONE_PA, PV_PARTS, FUSED_PINGPONG}
// (checked against internal/tiles when the module loads), the three pack
// kernels, the V pack of the tensor form (pack_v_tensor, its dynamic shared
// memory exported as fp8attn_pack9vt_d<D>_smem), the tiled tensor form's
// head start for grids of one wave (fp8attn_stage9th_d<D>, after its own V
// pack fp8attn_pack9vth_d<D>, no softcap twin), its key split for grids
// of few blocks over long rows of keys (fp8attn_stage9ts_d<D>, no softcap
// twin, whose parts fp8attn_merge9 merges, one merge for every head dim:
// hopper/split.cuh) and the fused form's (fp8attn_stage9fs_d<D>, over
// quant_pack9's images, the same parameters), quant_pack9 and its form
// for long heads (fp8attn_quantpack9l_d<D>).
// Each attention entry has a softcap twin, its name's form letters followed
// by c (fp8attn_stage9c_d<D>, stage9fc, stage9tc; the one-tile forms'
// stage9oc, stage9foc, stage9qoc, stage9toc): hopper::stage9 with SOFTCAP,
// for the calls with a softcap (Params' softcap), so that the others keep
// a softmax without it.
#define HOPPER_ATTENTION(HD, CAP, SOFTCAP)                                                                     \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9##CAP##_d##HD(const __grid_constant__ Params p) { \
    pdl_launch_dependents(); /* stage9 waits after its barriers' set-up */                                       \
    hopper::stage9<HD, false, false, false, false, SOFTCAP>(p);                                                  \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9f##CAP##_d##HD(const __grid_constant__ hopper::FusedQuantParams f) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, true, false, false, false, SOFTCAP>(f.p, &f);                                             \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9t##CAP##_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, false, false, false, true, SOFTCAP>(tp.f.p, &tp.f, &tp);                                  \
  }
#define HOPPER_ENTRY(HD)                                                                                       \
  HOPPER_ATTENTION(HD, , false)                                                                                 \
  HOPPER_ATTENTION(HD, c, true)                                                                                 \
  extern "C" __global__ void __launch_bounds__(128) fp8attn_pack9vt_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents(); /* pack_v_tensor waits after its barrier's set-up */                               \
    hopper::pack_v_tensor<HD>(tp);                                                                               \
  }                                                                                                             \
  extern "C" __device__ const int fp8attn_pack9vt_d##HD##_smem[1] = {hopper::PackVSmem<HD>::BYTES};             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9th_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents(); /* only ever after fp8attn_pack9vth (pdl.cuh) */                                     \
    hopper::stage9<HD, false, false, false, true, false, true>(tp.f.p, &tp.f, &tp);                              \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9ts_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents(); /* fp8attn_merge9 waits for the whole grid */                                        \
    hopper::stage9<HD, false, false, false, true, false, false, true>(tp.f.p, &tp.f, &tp);                       \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9fs_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents(); /* fp8attn_merge9 waits for the whole grid */                                        \
    hopper::stage9<HD, true, false, false, false, false, false, true>(tp.f.p, &tp.f, &tp);                        \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(128) fp8attn_pack9vth_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    hopper::pack_v_tensor<HD, true>(tp); /* its pdl_wait, then pdl_launch_dependents */                         \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) fp8attn_pack9q_d##HD(const __grid_constant__ Params p) {     \
    pdl_entry();                                                                                                 \
    hopper::pack_qk<HD, true>(p);                                                                                \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) fp8attn_pack9k_d##HD(const __grid_constant__ Params p) {     \
    pdl_entry();                                                                                                 \
    hopper::pack_qk<HD, false>(p);                                                                               \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) fp8attn_pack9v_d##HD(const __grid_constant__ Params p) {     \
    pdl_entry();                                                                                                 \
    hopper::pack_v<HD>(p);                                                                                       \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(hopper::QUANT_PACK_THREADS)                                      \
      __cluster_dims__(hopper::QUANT_PACK_CLUSTER, 1, 1) fp8attn_quantpack9_d##HD(const __grid_constant__ hopper::FusedQuantParams f) {                             \
    pdl_launch_dependents();                                                                                     \
    hopper::cluster_arrive(); /* waited for before the first remote store */                                    \
    QP_STAMP(threadIdx.x == 0, 0, 0);                                                                            \
    pdl_wait();                                                                                                  \
    hopper::quant_pack9<HD>(f);                                                                                  \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(hopper::QUANT_LONG_THREADS, hopper::QUANT_LONG_PER_SM)                                   \
      fp8attn_quantpack9l_d##HD(const __grid_constant__ hopper::QuantLongParams lp) {                            \
    pdl_entry();                                                                                                 \
    hopper::quant_pack9_long<HD>(lp);                                                                            \
  }                                                                                                             \
  extern "C" __device__ const int fp8attn_stage9_d##HD##_config[12] = {                                          \
      HopperTiles<HD>::D,        HopperTiles<HD>::DK,            HopperTiles<HD>::BM,     HopperTiles<HD>::BN,      \
      HopperTiles<HD>::THREADS,  HopperTiles<HD>::RING,          HopperTiles<HD>::SMEM,   HopperTiles<HD>::PINGPONG, \
      HopperTiles<HD>::SOFTMAX_TURNS, HopperTiles<HD>::ONE_PA,   HopperTiles<HD>::PV_PARTS, HopperTiles<HD>::FUSED_PINGPONG};
HOPPER_ENTRY(64)
// The one-tile form (hopper::stage9 with ONE) for D 64 (and its tensor
// form, fp8attn_stage9to_d64), launched where
// internal/tiles' HopperConfig.OneTile says so, in blocks of 256 threads
// (one producer and one consumer warpgroup; the bounds stay the tiled
// kernel's 384, so that the register split of setmaxnreg is the same), its
// block exported as fp8attn_stage9o_d64_config = {ONE_BM, ONE_THREADS}.
#define HOPPER_ONE_TILE(CAP, SOFTCAP)                                                                           \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9o##CAP##_d64(const __grid_constant__ Params p) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, false, true, false, false, SOFTCAP>(p);                                                   \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9fo##CAP##_d64(const __grid_constant__ hopper::FusedQuantParams f) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, true, true, false, false, SOFTCAP>(f.p, &f);                                              \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9to##CAP##_d64(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, false, true, false, true, SOFTCAP>(tp.f.p, &tp.f, &tp);                                   \
  }
HOPPER_ONE_TILE(, false)
HOPPER_ONE_TILE(c, true)
extern "C" __device__ const int fp8attn_stage9o_d64_config[2] = {HopperTiles<64>::ONE_BM, HopperTiles<64>::ONE_THREADS};
// The one-tile form quantizing its own float32 inputs (hopper::stage9 with
// QC; the calls internal/tiles' HopperConfig.OneTileQuantizing takes, in
// place of quant_pack9 and fp8attn_stage9fo_d64): a cluster of ONE_CLUSTER
// blocks a query head, exported as fp8attn_stage9qo_d64_config =
// {ONE_CLUSTER, ONE_BM, ONE_THREADS}.
#define HOPPER_QUANTIZING(CAP, SOFTCAP)                                                                         \
  extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(HopperTiles<64>::ONE_CLUSTER, 1, 1)     \
      fp8attn_stage9qo##CAP##_d64(const __grid_constant__ hopper::FusedQuantParams f) {                          \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, true, true, true, false, SOFTCAP>(f.p, &f);                                               \
  }
HOPPER_QUANTIZING(, false)
HOPPER_QUANTIZING(c, true)
extern "C" __device__ const int fp8attn_stage9qo_d64_config[3] = {HopperTiles<64>::ONE_CLUSTER, HopperTiles<64>::ONE_BM,
                                                                  HopperTiles<64>::ONE_THREADS};
// The entries without the float32 row sums (hopper::stage9 with NOLSE),
// named ..._nolse after their twins' names, for the calls that ask for no
// LSE: where a function holds one copy of the loop, with the sums (D 64,
// where internal/tiles' HopperConfig.NoLSEEntries builds them: the fused
// and tensor forms, the head start and the one-tile forms; and the softcap
// twins' fused and tensor forms at every head dim, D 64's one-tile forms
// too). The other head dims' plain entries hold both copies of the loop in
// one function (stage9's SUMLESS).
#define HOPPER_NOLSE_TILED(HD, CAP, SOFTCAP)                                                                   \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9f##CAP##_d##HD##_nolse(const __grid_constant__ hopper::FusedQuantParams f) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, true, false, false, false, SOFTCAP, false, false, false, true>(f.p, &f);                  \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9t##CAP##_d##HD##_nolse(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, false, false, false, true, SOFTCAP, false, false, false, true>(tp.f.p, &tp.f, &tp);       \
  }
#define HOPPER_NOLSE_ONE_TILE(CAP, SOFTCAP)                                                                    \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9fo##CAP##_d64_nolse(const __grid_constant__ hopper::FusedQuantParams f) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, true, true, false, false, SOFTCAP, false, false, false, true>(f.p, &f);                   \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9to##CAP##_d64_nolse(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, false, true, false, true, SOFTCAP, false, false, false, true>(tp.f.p, &tp.f, &tp);        \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(HopperTiles<64>::ONE_CLUSTER, 1, 1)     \
      fp8attn_stage9qo##CAP##_d64_nolse(const __grid_constant__ hopper::FusedQuantParams f) {                    \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<64, true, true, true, false, SOFTCAP, false, false, false, true>(f.p, &f);                    \
  }
#define HOPPER_NOLSE(HD)                                                                                       \
  static_assert(HopperTiles<HD>::NOLSE_ENTRIES, "internal/tiles builds no entries without the sums at this head dim"); \
  HOPPER_NOLSE_TILED(HD, , false)                                                                               \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9th_d##HD##_nolse(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents(); /* only ever after fp8attn_pack9vth (pdl.cuh) */                                     \
    hopper::stage9<HD, false, false, false, true, false, true, false, false, true>(tp.f.p, &tp.f, &tp);          \
  }
HOPPER_NOLSE(64)
HOPPER_NOLSE_ONE_TILE(, false)
HOPPER_NOLSE_ONE_TILE(c, true)
// The key split's merge (hopper/split.cuh), one for every head dim: 8 rows
// a block.
extern "C" __global__ void __launch_bounds__(256) fp8attn_merge9(const __grid_constant__ hopper::TensorParams tp) {
  pdl_entry();
  hopper::merge_parts(tp);
}
// The narrow tiled tensor form (hopper::stage9 with NARROW) where
// internal/tiles' HopperConfig.Narrow builds it (D 128): blocks of one
// producer and one consumer warpgroup of NARROW_BM rows, NARROW_PER_SM an
// SM, exported as fp8attn_stage9tn_d<D>_config = {NARROW_BM,
// NARROW_THREADS, NARROW_PER_SM, NSMEM}.
#define HOPPER_NARROW(HD)                                                                                      \
  static_assert(HopperTiles<HD>::NARROW, "internal/tiles builds no narrow form at this head dim");             \
  extern "C" __global__ void __launch_bounds__(HopperTiles<HD>::NARROW_THREADS, HopperTiles<HD>::NARROW_PER_SM) \
      fp8attn_stage9tn_d##HD(const __grid_constant__ hopper::TensorParams tp) {                                   \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, false, false, false, true, false, false, false, true>(tp.f.p, &tp.f, &tp);                \
  }                                                                                                             \
  extern "C" __device__ const int fp8attn_stage9tn_d##HD##_config[4] = {                                         \
      HopperTiles<HD>::NARROW_BM, HopperTiles<HD>::NARROW_THREADS, HopperTiles<HD>::NARROW_PER_SM, HopperTiles<HD>::NSMEM};
// The paged form (hopper::stage9 with PAGED: the tiled tensor form reading
// K and V from the paged cache's pages, hopper/paged.cuh) at D 128, the
// paged prefill's: fp8attn_stage9tp_d<D>, on the tensor form's geometry
// with the paged forms' ring; and its packed form over a varlen batch
// (VARLEN, hopper/packed.cuh), fp8attn_stage9tv_d<D>, a block an item.
// Both export fp8attn_stage9tp_d<D>_config = {PAGED_RING, PTSMEM}.
#define HOPPER_PAGED(HD)                                                                                      \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9tp_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, false, false, false, true, false, false, false, false, false, true>(tp.f.p, &tp.f, &tp);  \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9tv_d##HD(const __grid_constant__ hopper::TensorParams tp) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, false, false, false, true, false, false, false, false, false, true, true>(tp.f.p, &tp.f, &tp); \
  }                                                                                                             \
  extern "C" __device__ const int fp8attn_stage9tp_d##HD##_config[2] = {HopperTiles<HD>::PAGED_RING, HopperTiles<HD>::PTSMEM};
HOPPER_ENTRY(96)
HOPPER_ENTRY(128)
HOPPER_NARROW(128)
HOPPER_PAGED(128)
HOPPER_ENTRY(192)
HOPPER_ENTRY(256)
HOPPER_NOLSE_TILED(64, c, true)
HOPPER_NOLSE_TILED(96, c, true)
HOPPER_NOLSE_TILED(128, c, true)
HOPPER_NOLSE_TILED(192, c, true)
HOPPER_NOLSE_TILED(256, c, true)

FP8ATTN_EXPORT_PARAMS_LAYOUT
#define FQP_OFF(f) (int)offsetof(hopper::FusedQuantParams, f)
extern "C" __device__ const int fp8attn_fused_params_layout[] = {
    (int)sizeof(hopper::FusedQuantParams), FQP_OFF(p), FQP_OFF(bad), FQP_OFF(scale), FQP_OFF(limit)};
#define TP_OFF(f) (int)offsetof(hopper::TensorParams, f)
extern "C" __device__ const int fp8attn_tensor_params_layout[] = {
    (int)sizeof(hopper::TensorParams), TP_OFF(q), TP_OFF(k), TP_OFF(v), TP_OFF(f), TP_OFF(part_o), TP_OFF(part_w), TP_OFF(splits),
    TP_OFF(v_pages), TP_OFF(k_page_scale), TP_OFF(v_page_scale), TP_OFF(block_table), TP_OFF(pages_per_seq),
    TP_OFF(page_kv_heads), TP_OFF(q_rows), TP_OFF(items), TP_OFF(q_starts)};
extern "C" __device__ const int fp8attn_quantpack9_config[3] = {hopper::QUANT_PACK_THREADS, hopper::QUANT_PACK_CLUSTER,
                                                                hopper::QUANT_PACK_CODES};
extern "C" __device__ const int fp8attn_quantpack9l_config[4] = {hopper::QUANT_LONG_THREADS, hopper::QUANT_LONG_PER_SM,
                                                                 hopper::QUANT_LONG_CODES, hopper::QUANT_LONG_HELD};
#define QLP_OFF(f) (int)offsetof(hopper::QuantLongParams, f)
extern "C" __device__ const int fp8attn_quantlong_params_layout[] = {(int)sizeof(hopper::QuantLongParams), QLP_OFF(f),
                                                                     QLP_OFF(words), QLP_OFF(chunk_rows)};
