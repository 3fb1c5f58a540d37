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
//            hopper.cuh.
//
// Changelog
//   v1 (2026-11-22): stage 9: D in {64, 96, 128, 192, 256}, any Sq/Sk,
//                    GQA/MQA, both causal alignments, LSE; 2-deep ring; no
//                    intra-warpgroup overlap or ping-pong yet.
//   v2 (2026-11-22): 3-deep ring; softmax on raw scores with one FFMA and
//                    one EX2 (ex2.approx.ftz) a weight; a negative score
//                    factor folded into Q's codes by the pack.
//   v3 (2026-11-22): intra-warpgroup overlap (the next Q·Kᵀ issued with
//                    this tile's P·V, the softmax and P's packing into a
//                    second register set under P·V); the mask in a branch
//                    of its own (it ran predicated on every tile); row
//                    maxima and sums over four chains a row; the rescale
//                    skipped when no row's maximum grew. Ping-pong between
//                    the consumer warpgroups built, measured slower, off
//                    (FP8ATTN_S9_PINGPONG; since v15 at some head dims).
//   v4 (2026-11-22): quant_pack9: float32 Q, K and V quantized straight into
//                    the images in one launch (amax, encode, pack and the
//                    score factors; bit for bit the four launches it
//                    replaces). First one block a head (10.6 us for 24
//                    heads of 256×64: latency-bound, 16 warps on each of
//                    24 SMs); then a cluster of 4 blocks a head, each
//                    encoding a quarter of the rows, the head's amax
//                    exchanged through distributed shared memory.
//   v5 (2026-11-23): programmatic dependent launch (pdl.cuh): every entry
//                    lets the next kernel's blocks be scheduled at once and
//                    waits for the one before it only where it first
//                    touches global memory (stage9: after its barriers'
//                    set-up).
//   v6 (2026-11-23): accuracy. Each tile's P·V into a zeroed accumulator,
//                    added to O in float32 (FP8ATTN_S9_PROMOTE; D 192/256
//                    in two column halves); rows normalized by the tensor
//                    cores' sum of the rounded weights, P times a block of
//                    E4M3 ones (FP8ATTN_S9_LSUM). The running accumulator
//                    lost up to 64x the input-quantization error on values
//                    of one sign; now 1.08-1.32x, at 3-29% of the speed
//                    (docs/ACCURACY.md, docs/PERF.md).
//   v7 (2026-11-23): quant_pack9 reads its chunk once (held in registers
//                    between the amax and the encode, its codes in dynamic
//                    shared memory of the chunk's size) and ends with its
//                    images: the grid's last block no longer computes the
//                    score factors after every block's fence; the fused
//                    attention entry (fp8attn_stage9f_d*) computes its own
//                    from the scales quant_pack9 wrote. Its encode without
//                    a division (hopper::Encoder), the amax exchanged with
//                    one cluster barrier, two blocks of 512 a head.
//   v8 (2026-11-23): quant_pack9's V transpose by 4-byte loads and byte
//                    permutes (it was a byte load per code); redux.sync for
//                    the block amax. (Q and K stored straight from
//                    registers, without shared memory: slower, not kept.)
//   v9 (2026-11-23): stage 9's one-tile form (fp8attn_stage9o_d64 and the
//                    fused fp8attn_stage9fo_d64): D 64 with 129-256 keys in
//                    one score tile of 256 (wgmma m64n256k32), one softmax,
//                    no online rescale; the tiled kernel's images.
//   v10 (2026-11-23): the one-tile form in blocks of one consumer
//                    warpgroup (64 rows, 256 threads): twice the blocks,
//                    half the exponentials on each SM.
//   v11 (2026-11-23): V's descale loaded at the consumers' start, not after
//                    the last tile (the epilogue waited on it).
//   v12 (2026-11-23): the one-tile form quantizing its own inputs
//                    (fp8attn_stage9qo_d64): fused calls of at most 256
//                    query rows in one cluster of four blocks a head, each
//                    quantizing 64 query rows and 64 keys of K and V and
//                    copying its K and V codes into the others' shared
//                    memory; no quant_pack9, no images, one launch.
//   v13 (2026-11-23): the quantizing form's encode in straight-line code
//                    where a thread's values are finite (one branch a
//                    thread, not one a float4), the blocks' amax sent by
//                    st.async on an mbarrier instead of a cluster barrier,
//                    and the shares' copies issued by the consumer warp.
//   v15 (2026-11-23): ping-pong between the tiled kernel's consumer
//                    warpgroups at D 64, 192 and 256 (FP8ATTN_S9_PINGPONG
//                    = 2): 1-6% faster there since promotion (v6), 6-10%
//                    slower at D 96 and 128, which keep the v13 schedule.
//                    (v14, the one-tile form split across a cluster of
//                    two, was slower and not kept: docs/PERF.md.)
//   v16 (2026-11-23): P·V in column parts where one tile accumulator of
//                    D/2 registers spilled: two halves at D 128, four
//                    quarters at D 256 (FP8ATTN_S9_PARTS_D128/_D256). A
//                    loop timeline (FP8ATTN_S9_LOOP_STAMPS) showed the
//                    fold of a tile taking 370-400 cycles at D 128 and
//                    630-800 at D 256 against 80-130 at D 64: the spills'
//                    loads and stores. +15% at D 128, +29% at D 256.
//   v17 (2026-11-23): Q·Kᵀ without the k steps of the images' zero columns
//                    past D (D 96: 3 of 4, D 192: 6 of 8;
//                    FP8ATTN_S9_PAD_STEPS=1 builds them): +4% at D 96, +3%
//                    at D 192.
//   v18 (2026-11-23): at D 64 the consumer warpgroups take turns to run
//                    their softmaxes (FP8ATTN_S9_SOFTMAX_TURNS), not to
//                    issue their GEMMs, so that one's exponentials do not
//                    share the MUFU with the other's: +12% at D 64 (511
//                    TFLOP/s), the long shape 21.4 -> 19.0 us; slower at
//                    D 96 to 256, which keep v17's schedule. (A turn of
//                    the exponentials alone, and 2^x by a polynomial on
//                    the FMA pipe for 2 or 3 of every 8 weights, measured
//                    slower: docs/PERF.md, session 28.)
//   v19 (2026-11-23): at D 64 one set of P registers (FP8ATTN_S9_ONE_PA):
//                    P(t-1)·V(t-1) waited for, folded and its ring slot
//                    released after tile t's softmax, P(t) packed into the
//                    same registers. (P·V's A from shared memory, and P·V
//                    issued inside the softmax, measured slower: a
//                    warpgroup's wgmma issue returns only once the tensor
//                    cores take the work; docs/PERF.md, session 29.)
//   v20 (2026-11-24): the quantizing form's load addresses and score-factor
//                    parameters taken before pdl_wait, its largest
//                    magnitude before the amax exchange, and Encoder's
//                    remainder step without copysign (the signs on the FMAs'
//                    operands): the fused mission step 6.58 -> 6.38 us.
//   v21 (2026-11-24): the quantizing form's V taken by the producer
//                    warpgroup alone, after Q and K: its loads issued after
//                    theirs, its amax exchanged apart, its encode, sub-tile
//                    and copies beside the consumer's Q·Kᵀ and softmax (the
//                    producer at 96 registers); the consumer waits for Q
//                    and K only. The fused mission step 6.38 -> 6.03 us.
//   v22 (2026-11-24): the producer's V loads issued once Q's and K's have
//                    arrived: 6.02-6.07 -> 6.00-6.02 us. (K encoded and copied
//                    before Q, the consumer's setmaxnreg after its prologue,
//                    and the score factor's parameters through shared
//                    memory measured slower or the same: docs/PERF.md.)
//   v23 (2026-11-24): the quantizing form's Q and K loads in whole 32-byte
//                    sectors (a thread's float4 j at column 16j + 4(tid%4)),
//                    their codes stored four bytes at a time: 6.00-6.03 ->
//                    5.94-5.96 us.
//                    (Session 33: v20's score-factor parameter hoist,
//                    which ptxas ignored, removed; K's shares sent by
//                    st.async from registers measured slower: docs/PERF.md.)
//   v24 (2026-11-24): the quantizing form's V addresses computed from one
//                    per thread plus constant key offsets, without branches
//                    (session 32's form took a branch and a parameter read
//                    a key): the step unchanged, 5.95 us; computing them
//                    after pdl_wait measured the same (docs/PERF.md,
//                    session 33).
#include "common.cuh"
#include "hopper.cuh"

// Entry points per head dim: the attention kernel, its fused form (float32
// inputs quantized by quant_pack9 just before: the score factors from their
// scales), its geometry exported as
// fp8attn_stage9_d<D>_config = {D, DK, BM, BN, THREADS, RING, SMEM}
// followed by its schedule {PINGPONG, SOFTMAX_TURNS, ONE_PA, PV_PARTS}
// (checked against internal/tiles when the module loads), the three pack
// kernels and quant_pack9.
#define HOPPER_ENTRY(HD)                                                                                       \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9_d##HD(const __grid_constant__ Params p) { \
    pdl_launch_dependents(); /* stage9 waits after its barriers' set-up */                                       \
    hopper::stage9<HD>(p);                                                                                       \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9f_d##HD(const __grid_constant__ hopper::FusedQuantParams f) { \
    pdl_launch_dependents();                                                                                     \
    hopper::stage9<HD, true>(f.p, &f);                                                                           \
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
  extern "C" __device__ const int fp8attn_stage9_d##HD##_config[11] = {                                          \
      HopperTiles<HD>::D,        HopperTiles<HD>::DK,            HopperTiles<HD>::BM,     HopperTiles<HD>::BN,      \
      HopperTiles<HD>::THREADS,  HopperTiles<HD>::RING,          HopperTiles<HD>::SMEM,   HopperTiles<HD>::PINGPONG, \
      HopperTiles<HD>::SOFTMAX_TURNS, HopperTiles<HD>::ONE_PA,   HopperTiles<HD>::PV_PARTS};
HOPPER_ENTRY(64)
// The one-tile form (hopper::stage9 with ONE) for D 64, launched where
// internal/tiles' HopperConfig.OneTile says so, in blocks of 256 threads
// (one producer and one consumer warpgroup; the bounds stay the tiled
// kernel's 384, so that the register split of setmaxnreg is the same), its
// block exported as fp8attn_stage9o_d64_config = {ONE_BM, ONE_THREADS}.
extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9o_d64(const __grid_constant__ Params p) {
  pdl_launch_dependents();
  hopper::stage9<64, false, true>(p);
}
extern "C" __global__ void __launch_bounds__(384, 1) fp8attn_stage9fo_d64(const __grid_constant__ hopper::FusedQuantParams f) {
  pdl_launch_dependents();
  hopper::stage9<64, true, true>(f.p, &f);
}
extern "C" __device__ const int fp8attn_stage9o_d64_config[2] = {HopperTiles<64>::ONE_BM, HopperTiles<64>::ONE_THREADS};
// The one-tile form quantizing its own float32 inputs (hopper::stage9 with
// QC; the calls internal/tiles' HopperConfig.OneTileQuantizing takes, in
// place of quant_pack9 and fp8attn_stage9fo_d64): a cluster of ONE_CLUSTER
// blocks a query head, exported as fp8attn_stage9qo_d64_config =
// {ONE_CLUSTER, ONE_BM, ONE_THREADS}.
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(HopperTiles<64>::ONE_CLUSTER, 1, 1)
    fp8attn_stage9qo_d64(const __grid_constant__ hopper::FusedQuantParams f) {
  pdl_launch_dependents();
  hopper::stage9<64, true, true, true>(f.p, &f);
}
extern "C" __device__ const int fp8attn_stage9qo_d64_config[3] = {HopperTiles<64>::ONE_CLUSTER, HopperTiles<64>::ONE_BM,
                                                                  HopperTiles<64>::ONE_THREADS};
HOPPER_ENTRY(96)
HOPPER_ENTRY(128)
HOPPER_ENTRY(192)
HOPPER_ENTRY(256)

// TestFastEncodeAllFloats's kernel (hopper.cuh's encode_check).
extern "C" __global__ void __launch_bounds__(256) fp8attn_encode_check(const __grid_constant__ hopper::EncodeCheckParams p) {
  pdl_entry();
  hopper::encode_check(p);
}

FP8ATTN_EXPORT_PARAMS_LAYOUT
#define FQP_OFF(f) (int)offsetof(hopper::FusedQuantParams, f)
extern "C" __device__ const int fp8attn_fused_params_layout[] = {
    (int)sizeof(hopper::FusedQuantParams), FQP_OFF(p), FQP_OFF(bad), FQP_OFF(scale), FQP_OFF(limit)};
#define ECP_OFF(f) (int)offsetof(hopper::EncodeCheckParams, f)
extern "C" __device__ const int fp8attn_encode_check_params_layout[] = {(int)sizeof(hopper::EncodeCheckParams), ECP_OFF(amax),
                                                                        ECP_OFF(result), ECP_OFF(n)};
extern "C" __device__ const int fp8attn_quantpack9_config[3] = {hopper::QUANT_PACK_THREADS, hopper::QUANT_PACK_CLUSTER,
                                                                hopper::QUANT_PACK_CODES};
