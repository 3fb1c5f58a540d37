// hopper/attention.cuh: stage9, the attention kernel's shell: the block's
// set-up, the producer warpgroup, a consumer warpgroup's set-up, its form
// (hopper/mainloop.cuh: the one-tile form or the tiled main loop) and the
// epilogue. Included by hopper.cuh only, inside namespace hopper, in its
// order.
#pragma once

// init_barriers initializes the block's mbarriers (thread 0; QC: with the
// transaction counts of the other blocks' shares and of every block's
// amax; TENSORS: and tensor_bars, produce_tensors' own) and its block of
// ones, visible to every thread and the async proxy on return.
template <int D, bool QC, bool TENSORS, int WARPS = 8, int R = HopperTiles<D>::RING>
__device__ __forceinline__ void init_barriers(uint64_t* q_full, uint64_t* k_full, uint64_t* v_full, uint64_t* empty,
                                              uint64_t* tensor_bars, uint8_t* s_ones) {
  using G = Geometry<D, R>;
  constexpr int DK = G::DK, RING = G::RING;
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    // (TENSORS: q_raw and the two staging buffers' barriers)
    for (int i = 0; TENSORS && i < 3; i++) mbar_init(&tensor_bars[i], 1);
    for (int s = 0; s < RING; s++) {
      mbar_init(&k_full[s], 1);
      mbar_init(&v_full[s], QC && s == 0 ? 2 : 1);  // (QC: and the producer's own V share)
      mbar_init(&empty[s], WARPS);  // one arrival per consumer warp
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
}

// producer is the producer warpgroup of stage9 (threads 0-127), which
// returns after it: it gives registers away and its thread 0 issues the
// copies of the ntiles tiles (produce); QC: it quantizes the block's share
// of V (its values xv) instead, then waits for every block's shares;
// TENSORS: the whole warpgroup reads the caller's tensors through tp's
// maps (produce_tensors); PAGED: K and V from the paged cache
// (produce_paged, skb the batch entry's keys; the consumers encode Q). Each gives the
// consumers' 240 registers a thread what the block's launch allocation
// (384 threads of 168) holds: the producer keeps 24.
template <int D, bool FUSED, bool ONE, bool QC, bool TENSORS, bool HEAD, bool NARROW, bool PAGED = false>
__device__ __forceinline__ void producer(const Params& p, const TensorParams* tp, int b, int h, int kvh, int i0, int t0, int ntiles,
                                         long long sq_p, long long sk_p, long long skb, uint8_t* s_q, uint8_t* s_k, uint8_t* s_v,
                                         uint64_t* q_full, uint64_t* k_full, uint64_t* v_full, uint64_t* empty, float4 (&xv)[8]) {
  if constexpr (PAGED) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    produce_paged<D>(*tp, b, kvh, t0, ntiles, skb, smem_u32(s_q));
    return;
  }
  if constexpr (TENSORS) {
    // Every thread of the warpgroup transposes V; a negative score factor
    // (the sign of scale · Q descale · K descale) negates Q's codes.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    const bool neg = tp->f.scale * (double)p.q_scale[b * p.hq + h] * (double)p.k_scale[b * p.hkv + kvh] < 0.0;
    produce_tensors<D, ONE, HEAD, NARROW>(*tp, b, h, kvh, i0, t0, ntiles, neg, smem_u32(s_q));
    return;
  }
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
    produce<D, ONE>(p, b, h, kvh, i0, t0, ntiles, sq_p, sk_p, s_q, s_k, s_v, q_full, k_full, v_full, empty);
    QP_STAMP(FUSED, 1, 5);
  }
}

// score_factor_of is the score factor of query head h of batch b,
// positive (the pack, or the tensor form's producer, negated Q where it is
// not) and at least the smallest normal float, so that -Inf·c stays -Inf.
// FUSED (inputs quantized by quant_pack9 just before, or the tensor form's
// caller's scales): score_factors' value from the scales in p, a factor
// beyond the limit flagged in f->bad; QC: from the scales the block found
// (qc).
template <bool FUSED, bool QC>
__device__ __forceinline__ float score_factor_of(const Params& p, const FusedQuantParams* f, const HeadScales& qc, int b, int h, int kvh) {
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
  return c;
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
// between tiles (docs/design/hopper-prefill.md).
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
//
// TENSORS (with f = &tp->f) reads the caller's tensors through tp's tensor
// maps instead of images (hopper/tensors.cuh), in the tiled and the
// one-tile form; the score factor is the fused form's, from the scales.
//
// The attention variants (Params' window, softcap and sinks): a sliding
// window starts the tiled form's blocks at the key tile of their first
// row's first key (no tile before it is loaded or computed) and masks
// each row's keys below its window in the tiles that hold them; SOFTCAP
// caps the scores in the softmax (softmax_tile); the sinks join the
// denominators in the epilogue.
//
// NARROW (the tiled tensor form, HopperTiles<D>::NARROW; internal/tiles'
// NarrowLaunch) runs blocks of one producer and one consumer warpgroup of
// NARROW_BM = 64 rows, two an SM (launch bounds, 232 registers a consumer
// thread, NSMEM bytes of shared memory without the staging buffers), so
// that one block's prologue, pipeline fill and drain and epilogue run
// beside the other's main loop; its ring slots are released by the
// consumer's four warps.
//
// SPLIT (the key-split launch of the tiled tensor form, or of the fused
// form over quant_pack9's images, TensorParams): block z b·splits + part
// takes part part of the key tiles its rows see, the parts
// ceil(ntiles/splits) tiles each, and writes its rows as a part
// (epilogue_part), which fp8attn_merge9 merges. The fused form's split
// takes the tensor form's GEMM turns: its grids are one wave.
//
// NOLSE (the entries named ..._nolse: D 64's where
// HopperTiles<D>::NOLSE_ENTRIES, and the softcap twins' at every head dim)
// takes no float32 row sums, for the calls that ask for no LSE (the host
// launches them only with p.lse null): where one function held both
// copies of the loop it measured slower than either alone.
//
// PAGED (the tiled tensor form over the paged cache, fp8attn_stage9tp_d<D>:
// hopper/paged.cuh) reads K and V from the cache's pages, a tile's scales
// its pages', and each consumer warpgroup encodes its own rows of the
// caller's float32 queries, a scale a row (quantize_rows); a row's score
// factor is taken a tile (its Q descale's factor times the tile's K scale),
// the output descaled by the last tile's V scale (Consumer's PAGED steps),
// and a head whose factor passes the limit flagged after the loop
// (flag_rows).
//
// VARLEN (the packed form, fp8attn_stage9tv_d<D>: the paged form over a
// varlen batch in one launch, hopper/packed.cuh) takes block x's rows from
// item x of tp->items: one sequence's rows for one KV head, its query
// heads' rows packed query-major (PackedRows), each row's keys by its own
// query's position in its sequence, its outputs at its own head and row.
template <int D, bool FUSED = false, bool ONE = false, bool QC = false, bool TENSORS = false, bool SOFTCAP = false, bool HEAD = false,
          bool SPLIT = false, bool NARROW = false, bool NOLSE = false, bool PAGED = false, bool VARLEN = false>
__device__ __forceinline__ void stage9(const Params& p, const FusedQuantParams* f = nullptr, const TensorParams* tp = nullptr) {
  // (PAGED: the paged forms' deeper ring, in their larger budget.)
  using G = Geometry<D, PAGED ? HopperTiles<D>::PAGED_RING : HopperTiles<D>::RING>;
  constexpr int DK = G::DK, BM = G::BM, BN = G::BN, RING = G::RING, WK = G::WK;
  // SN: the keys of one score tile.
  constexpr int SN = ONE ? 2 * BN : BN;
  // ROWS: the query rows of a block (one Q image block of 64 in the
  // one-tile form; Q's image is in blocks of 64 rows, padded to BM).
  // (NARROW: one consumer warpgroup, NARROW_BM rows.)
  constexpr int ROWS = ONE ? G::ONE_BM : NARROW ? HopperTiles<D>::NARROW_BM : BM;
  constexpr int QROWS = NARROW ? HopperTiles<D>::NARROW_BM : BM;  // Q's block in shared memory
  static_assert(!NARROW || (TENSORS && !ONE && !FUSED && !QC && !HEAD && !SPLIT && HopperTiles<D>::NARROW_BM == 64 &&
                            HopperTiles<D>::NARROW_THREADS == 256 &&
                            HopperTiles<D>::NSMEM >= 64 * DK + RING * (G::KT + G::VT) + G::ONES + 8 * (4 + 3 * RING) + 1023),
                "the narrow form: the tiled tensor form, one consumer warpgroup of 64 rows, its "
                "shared memory budget");
  static_assert(!ONE || (DK == WK && SN <= 256 && RING >= 2), "the one-tile form: one K panel, an n256 wgmma at most, two ring slots");
  static_assert(!QC || (FUSED && ONE), "the quantizing form is a fused one-tile form");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  uint8_t* s_q = smem;
  uint8_t* s_k = s_q + QROWS * DK;
  uint8_t* s_v = s_k + RING * G::KT;
  uint8_t* s_ones = s_v + RING * G::VT;  // 1024-aligned, as the swizzled descriptors want
  // (TENSORS: V's two staging buffers after the ones, TensorSmem.)
  uint64_t* bars = (uint64_t*)(s_ones + G::ONES + (TENSORS && !NARROW ? 2 * G::KT : 0));
  uint64_t* q_full = bars;
  uint64_t* k_full = bars + 1;
  uint64_t* v_full = bars + 1 + RING;
  uint64_t* empty = bars + 1 + 2 * RING;
  uint64_t* tensor_bars = bars + 1 + 3 * RING;  // (TENSORS: TensorSmem's q_raw ..)
  using TS = TensorSmem<D, NARROW, RING>;
  static_assert(!TENSORS || (TS::STAGE == QROWS * DK + RING * (G::KT + G::VT) + G::ONES &&
                              TS::Q_RAW == TS::BARS + 8 * (1 + 3 * RING)),
                "the tensor form's producer sees stage9's layout");
  static_assert(!TENSORS || (PAGED ? HopperTiles<D>::PTSMEM : HopperTiles<D>::TSMEM) >=
                                BM * DK + RING * (G::KT + G::VT) + G::ONES + 2 * G::KT + 8 * (4 + 3 * RING) + 1023,
                "the tensor form's shared memory budget");
  static_assert(!TENSORS || !QC, "the tensor form reads FP8 tensors");
  static_assert(!NOLSE || ((HopperTiles<D>::NOLSE_ENTRIES || SOFTCAP) && !SPLIT),
                "entries without the sums: where internal/tiles builds them and under a softcap, never a key split's");
  static_assert(!PAGED || (TENSORS && !ONE && !FUSED && !QC && !HEAD && !SPLIT && !NARROW && !SOFTCAP && !NOLSE),
                "the paged form: the tiled, wide tensor form without a softcap");
  static_assert(!VARLEN || PAGED, "the packed form is a paged form");

  // (QC: block x is also the cluster rank, which picks the block's keys.)
  const int qb = p.mask && !QC ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x;
  static_assert(!SPLIT || (TENSORS != FUSED && !ONE && !HEAD), "the key split is the tiled tensor or fused form's");
  const int splits = SPLIT ? (int)tp->splits : 1, part = SPLIT ? (int)blockIdx.z % splits : 0;
  // (VARLEN: the block's item, from the call's tables, which its upload
  // wrote before the kernel's predecessor, as seq_k; the host orders the
  // items heaviest first.)
  PackedRows pr{};
  if constexpr (VARLEN) pr = packed_rows(*tp, (int)p.group, (int)blockIdx.x);
  // (The block index's division is unsigned, as blockIdx is: a signed one
  // gives the key split other SASS.)
  const int h = VARLEN ? 0 : blockIdx.y, b = VARLEN ? pr.b : blockIdx.z / splits, kvh = VARLEN ? pr.kvh : h / (int)p.group;
  const int sq = (int)p.sq, sk = (int)p.sk, i0 = qb * ROWS;
  // The batch entry's keys (seq_k's, or sk); the keys the block's first
  // row sees from and its last row sees up to bound the tiles it loads,
  // key tiles t0 .. t0 + ntiles - 1 (the one-tile form loads both tiles;
  // QC: a block past the query rows quantizes its keys only). seq_k is
  // read before pdl_wait: its writer (a host copy) precedes the kernel's
  // predecessor on the stream (Params).
  const long long skb = p.seq_k ? (long long)p.seq_k[b] : p.sk;
  // (VARLEN: the block's first row's query is its lowest, its last's its
  // highest.)
  const int key_lo = VARLEN ? first_key(p, pr.query(0), pr.count, skb) : first_key(p, i0, skb);
  const int key_hi = VARLEN ? visible_keys(p, pr.query(pr.nrows - 1), pr.count, skb) : visible_keys(p, min(i0 + ROWS, sq) - 1, skb);
  const int tb = ONE ? 0 : key_lo / BN;
  const int nb = QC && i0 >= sq ? 0 : max(0, (key_hi + BN - 1) / BN - tb);
  const int per = (nb + splits - 1) / splits;  // (SPLIT: the parts' tiles)
  const int t0 = tb + part * per, ntiles = SPLIT ? max(0, min(per, nb - part * per)) : nb;
  const long long sq_p = (sq + BM - 1) / BM * BM, sk_p = (sk + BN - 1) / BN * BN;

  QP_STAMP(!QC && threadIdx.x == 0, 1, 0);
  unsigned qp_entry = 0;  // (a profile build's entry time, stored after pdl_wait)
  init_barriers<D, QC, TENSORS, NARROW ? 4 : 8, RING>(q_full, k_full, v_full, empty, tensor_bars, s_ones);
  if constexpr (QC) cluster_arrive();  // waited for before the amax exchange's remote stores
  PROFILE_CLOCK(qp_entry);
  OneTileSources src{};  // (QC: its loads' addresses, from the parameters alone)
  if constexpr (QC) src = one_tile_sources<D>(p, b, h, kvh, i0, (int)blockIdx.x, (int)threadIdx.x);
  // Before the first global access but seq_k's (pdl.cuh); HEAD's producer
  // waits before the V image's first copy, its consumers before their
  // rows' stores (produce_tensors).
  static_assert(!HEAD || (TENSORS && !ONE && !FUSED), "the head start is the tiled tensor form's");
  if constexpr (!HEAD) pdl_wait();
  QP_STAMP(threadIdx.x == 0, 1, 1);
  PROFILE_VALUE(QC && threadIdx.x == 0, 0, 0, 0, qp_entry);
  (void)qp_entry;
  HeadScales qc{};
  float4 xv[8];  // (QC: the producer's V values, loaded by quantize_one_tile)
  if constexpr (QC) qc = quantize_one_tile<D>(*f, src, i0, s_q, s_k, k_full, xv);

  if (threadIdx.x < 128) {
    producer<D, FUSED, ONE, QC, TENSORS, HEAD, NARROW, PAGED>(p, tp, b, h, kvh, i0, t0, ntiles, sq_p, sk_p, skb, s_q, s_k, s_v, q_full,
                                                k_full, v_full, empty, xv);
    return;
  }
  // (NARROW: NARROW_PER_SM = 2 blocks of 256 threads share the register
  // file, 128 registers a thread at launch; the producer's 24 leave the
  // consumer 232.)
  static_assert(!NARROW || HopperTiles<D>::NARROW_PER_SM == 2, "the narrow form's register split is for two blocks an SM");
  if constexpr (NARROW) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  }

  // Consumer warpgroup cw: rows i0 + 64cw .. +63; this thread rows r0, r0+8.
  const int cw = threadIdx.x / 128 - 1, tid = threadIdx.x % 128;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const int wg_row = i0 + 64 * cw, r0 = wg_row + 16 * warp + g;
  const long long skc = p.seq_k ? (long long)p.seq_k[b] : p.sk;  // (skb, not kept live across the fork)
  // (VARLEN: halves, an item whose rows fit one warpgroup, both
  // warpgroups holding them, each half of every tile's keys; rw, the
  // block's row block the warpgroup holds; lr0, the thread's first row in
  // the block.)
  bool halves = false;
  if constexpr (VARLEN) halves = pr.nrows <= 64;
  const int rw = halves ? 0 : cw;
  const int lr0 = 64 * rw + 16 * warp + g;
  const RowKeys rk = VARLEN ? packed_keys(p, pr, lr0, rw, skc)
                            : RowKeys{first_key(p, r0, skc),
                                      visible_keys(p, r0, skc),
                                      first_key(p, r0 + 8, skc),
                                      visible_keys(p, r0 + 8, skc),
                                      visible_keys(p, min(wg_row, sq - 1), skc),
                                      first_key(p, min(wg_row + 63, sq - 1), skc)};
  // (PAGED: the rows' own, without K's scale, which each tile brings; as
  // score_factor's product, in float64 and rounded once, the tile's power
  // of two exact. The thread encodes the warpgroup's row tid / 2.)
  float2 crow = {0.f, 0.f};
  if constexpr (PAGED) {
    const int qr = wg_row + tid / 2;
    const float* src = VARLEN     ? packed_source(*tp, pr, 64 * rw + tid / 2)
                       : qr < sq ? tp->q_rows + b * p.q_batch_stride + h * p.q_head_stride + (long long)qr * p.q_row_stride
                                 : nullptr;
    crow = quantize_rows<D>(*tp, src, cw, tid, smem_u32(s_q + cw * G::QB), smem_u32(smem));
  }
  // (VARLEN: an item of at most DECODE_ROWS rows, a decode token's, runs
  // the swapped GEMMs to its end: hopper/packed_decode.cuh.)
  if constexpr (VARLEN) {
    if (pr.nrows <= DECODE_ROWS) {
      decode_item<D>(p, *tp, pr, cw, tid, t0, ntiles, skc, s_k, s_v, k_full, v_full, empty, smem_u32(s_q + cw * G::QB),
                     smem_u32(smem));
      return;
    }
  }
  float c = PAGED ? 0.f : score_factor_of<FUSED || TENSORS, QC>(p, f, qc, b, h, kvh), cap_in = 0.f;
  if constexpr (SOFTCAP) {  // softmax_tile's factors
    const float cap = p.softcap * LOG2E;
    cap_in = c / cap;
    c = cap;
  }
  // The sink's logit in the log2 domain, for the epilogue, loaded here as
  // V's descale is.
  const float sink = !SPLIT && !VARLEN && p.sinks ? p.sinks[h] * LOG2E : NEG_INF;  // (SPLIT: at the merge; VARLEN: a row's head's)
  // V's descale, for the epilogue: loaded here, beside the tiles' trip, not
  // after the last tile (a dependent global load of 0.5 µs there).
  // (QC: V's scale is known once the producer's V exchange is done, and is
  // taken in the epilogue.)
  float vs = QC || PAGED ? 0.f : p.v_scale[b * p.hkv + kvh];  // (PAGED: O's unit, after the loop)
  QP_STAMP(threadIdx.x == 128, 1, 2);
  const uint32_t q_addr = smem_u32(s_q + cw * G::QB);

  // The register state (hopper/mainloop.cuh's Consumer names the forms'
  // constants). l: the float32 row sums of the unrounded weights (the
  // LSE); lsum: the sums of the rounded weights, from the tensor cores
  // (the normalizer).
  using C = Consumer<D, ONE, QC, SOFTCAP, NARROW, FUSED && !SPLIT, PAGED, false, RING>;  // (a split grid is one wave: the tensor form's turns)
  static_assert(!NARROW || (!C::PINGPONG && !C::SMTURNS), "the narrow form's one consumer warpgroup takes no turns");
  const uint32_t ones_addr = smem_u32(s_ones);
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, lsum[2] = {0.f, 0.f};
  float o[D / 2];  // O: the sum of the finished tiles
#pragma unroll
  for (int i = 0; i < D / 2; i++) o[i] = 0.f;
  float ot[C::DP / 2];  // one column part of one tile's P·V
  float lt[4];          // one tile's P·ones: its rows' sums
  float s[C::SN / 2];   // scores of tile t, then its weights P·2^8
  typename C::PA pa[2];
  const Turns<C::SMTURNS, 3> softmax_turns{cw};
  C cs{s_k, s_v, k_full, v_full, empty, q_addr, ones_addr, lane, tq, rk, t0, c, cap_in, s, ot, lt, m, l, softmax_turns};
  if constexpr (PAGED) {
    cs.c0 = crow;
    cs.scales_addr = smem_u32(smem) + PagedSmem<D>::SCALES;
  }
  // The float32 row sums serve the LSE alone (the key split's merge takes
  // its parts' sums). A second copy of the tiled main loop, without them,
  // runs the calls that ask for no LSE where it measured faster: D 96 and
  // above without a softcap (at D 64 and under a softcap the copy was
  // slower; docs/design/hopper-prefill.md). There the calls without an
  // LSE run entries of their own (NOLSE) instead.
  const bool sums = SPLIT || p.lse != nullptr;
  constexpr bool SUMLESS = !ONE && D >= 96 && !SOFTCAP;
  const bool summed = !NOLSE && (sums || !SUMLESS);
  if (ONE && ntiles > 0) {
    cs.template one_tile<!NOLSE>(q_full, o, lsum, pa);
  } else if (NOLSE && ntiles > 0) {
    cs.template main_loop<false>(q_full, ntiles, cw, tid, o, lsum, pa);
  } else if (VARLEN && halves && ntiles > 0) {
    if constexpr (VARLEN) {  // (its own score tile and weights, of half the keys)
      using CH = Consumer<D, ONE, QC, SOFTCAP, NARROW, FUSED && !SPLIT, PAGED, true, RING>;
      float sh[CH::SN / 2];
      typename CH::PA pah[2];
      CH ch{s_k, s_v, k_full, v_full, empty, q_addr, ones_addr, lane, tq, rk, t0, c, cap_in, sh, ot, lt, m, l, softmax_turns};
      ch.c0 = crow;
      ch.scales_addr = cs.scales_addr;
      ch.kh = cw;
      if (summed) ch.template main_loop<true>(q_full, ntiles, cw, tid, o, lsum, pah);
      else ch.template main_loop<false>(q_full, ntiles, cw, tid, o, lsum, pah);
      cs.kmax = ch.kmax;
      cs.vunit = ch.vunit;
    }
  } else if (ntiles > 0) {
    if (summed) cs.template main_loop<true>(q_full, ntiles, cw, tid, o, lsum, pa);
    else cs.template main_loop<false>(q_full, ntiles, cw, tid, o, lsum, pa);
  }

  if constexpr (QC) {  // every share has landed here (without a tile, too)
    mbar_wait(&k_full[0], 0);
    mbar_wait(&v_full[0], 0);
    cluster_arrive();
    vs = one_tile_v_scale<D>();
  }

  if constexpr (PAGED) {  // (the head of the thread's encoded row, tid / 2)
    const int bh = VARLEN ? pr.b * (int)p.hq + pr.head(64 * rw + tid / 2) : b * (int)p.hq + h;
    if (ntiles > 0) flag_rows<D>(*tp, bh, cw, tid, cs.kmax, smem_u32(smem));
    vs = cs.vunit;
  }
  if constexpr (HEAD) pdl_wait();
  // Epilogue: the quad's partial row sums, then rows r0 and r0 + 8.
  QP_STAMP(threadIdx.x == 128, 1, 3);
  if constexpr (SPLIT) {
    epilogue_part<D>(*tp, o, m, l, lsum, vs, part, b, h, r0, tq, sq);
  } else if constexpr (VARLEN) {
    // (halves: warpgroup 0 writes the merged rows.)
    if (halves) merge_halves<D>(reinterpret_cast<float*>(s_k), cw, tid, o, m, l, lsum);
    if (!halves || cw == 0) epilogue_packed<D>(p, pr, o, m, l, lsum, vs, summed, lr0, tq);
  } else {
    epilogue<D>(p, o, m, l, lsum, vs, sink, summed, b, h, r0, tq, sq);
  }
  QP_STAMP(threadIdx.x == 128, 1, 4);
  if constexpr (QC) cluster_wait();  // no block exits while its shares may still be read
}
