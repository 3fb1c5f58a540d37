// hopper/attention.cuh: stage9, the attention kernel: the producer and
// consumer warpgroups, the tiled main loop, the one-tile form, the softmax
// and the epilogue. Included by hopper.cuh only, inside namespace hopper,
// in its order.
#pragma once

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
template <int D, bool FUSED = false, bool ONE = false, bool QC = false>
__device__ __forceinline__ void stage9(const Params& p, const FusedQuantParams* f = nullptr) {
  using G = Geometry<D>;
  constexpr int DK = G::DK, BM = G::BM, BN = G::BN, RING = G::RING, WK = G::WK, WV = G::WV;
  // SN: the keys of one score tile.
  constexpr int SN = ONE ? 2 * BN : BN;
  // ROWS: the query rows of a block (one Q image block of 64 in the
  // one-tile form; Q's image is in blocks of 64 rows, padded to BM).
  constexpr int ROWS = ONE ? G::ONE_BM : BM;
  static_assert(!ONE || (DK == WK && SN <= 256 && RING >= 2), "the one-tile form: one K panel, an n256 wgmma at most, two ring slots");
  static_assert(!QC || (FUSED && ONE), "the quantizing form is a fused one-tile form");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  uint8_t* s_q = smem;
  uint8_t* s_k = s_q + BM * DK;
  uint8_t* s_v = s_k + RING * G::KT;
  uint8_t* s_ones = s_v + RING * G::VT;  // 1024-aligned, as the swizzled descriptors want
  uint64_t* bars = (uint64_t*)(s_ones + G::ONES);
  uint64_t* q_full = bars;
  uint64_t* k_full = bars + 1;
  uint64_t* v_full = bars + 1 + RING;
  uint64_t* empty = bars + 1 + 2 * RING;

  // (QC: block x is also the cluster rank, which picks the block's keys.)
  const int qb = p.mask && !QC ? (int)gridDim.x - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, kvh = h / (int)p.group;
  const int sq = (int)p.sq, sk = (int)p.sk, i0 = qb * ROWS;
  // The keys the block's last row sees bound the tiles it loads (QC: a
  // block past the query rows quantizes its keys only).
  const int ntiles = QC && i0 >= sq ? 0 : (visible_keys(p, min(i0 + ROWS, sq) - 1) + BN - 1) / BN;
  const long long sq_p = (sq + BM - 1) / BM * BM, sk_p = (sk + BN - 1) / BN * BN;

  QP_STAMP(FUSED && !QC && threadIdx.x == 0, 1, 0);
  unsigned qp_entry = 0;  // (a profile build's entry time, stored after pdl_wait)
  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < RING; s++) {
      mbar_init(&k_full[s], 1);
      mbar_init(&v_full[s], QC && s == 0 ? 2 : 1);  // (QC: and the producer's own V share)
      mbar_init(&empty[s], 8);  // one arrival per consumer warp
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
  if constexpr (QC) cluster_arrive();  // waited for before the amax exchange's remote stores
  PROFILE_CLOCK(qp_entry);
  OneTileSources src{};  // (QC: its loads' addresses, from the parameters alone)
  if constexpr (QC) src = one_tile_sources<D>(p, b, h, kvh, i0, (int)blockIdx.x, (int)threadIdx.x);
  pdl_wait();  // before the first global access (pdl.cuh)
  QP_STAMP(FUSED && threadIdx.x == 0, 1, 1);
  PROFILE_VALUE(QC && threadIdx.x == 0, 0, 0, 0, qp_entry);
  (void)qp_entry;
  HeadScales qc{};
  float4 xv[8];  // (QC: the producer's V values, loaded by quantize_one_tile)
  if constexpr (QC) qc = quantize_one_tile<D>(*f, src, i0, s_q, s_k, k_full, xv);

  if (threadIdx.x < 128) {  // producer warpgroup
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
      produce<D, ONE>(p, b, h, kvh, i0, ntiles, sq_p, sk_p, s_q, s_k, s_v, q_full, k_full, v_full, empty);
      QP_STAMP(FUSED, 1, 5);
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");

  // Consumer warpgroup cw: rows i0 + 64cw .. +63; this thread rows r0, r0+8.
  const int cw = threadIdx.x / 128 - 1, tid = threadIdx.x % 128;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const int wg_row = i0 + 64 * cw, r0 = wg_row + 16 * warp + g;
  const int vis0 = visible_keys(p, r0), vis1 = visible_keys(p, r0 + 8);
  const int vis_min = visible_keys(p, min(wg_row, sq - 1));
  // The score factor, positive (the pack negated Q where it is not) and
  // at least the smallest normal float, so that -Inf·c stays -Inf. FUSED
  // (inputs quantized by quant_pack9 just before): score_factors' value
  // from the scales it wrote, a factor beyond the limit flagged in f->bad.
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
  // V's descale, for the epilogue: loaded here, beside the tiles' trip, not
  // after the last tile (a dependent global load of 0.5 µs there).
  // (QC: V's scale is known once the producer's V exchange is done, and is
  // taken in the epilogue.)
  float vs = QC ? 0.f : p.v_scale[b * p.hkv + kvh];
  QP_STAMP(FUSED && threadIdx.x == 128, 1, 2);
  const uint32_t q_addr = smem_u32(s_q + cw * G::QB);

  // Promotion, the normalizer and the column parts: see above. P·V runs
  // in NP column parts of DP = D/NP columns (HopperTiles<D>::PV_PARTS), one
  // after the other into the same tile accumulator.
  constexpr int NP = ONE ? 1 : HopperTiles<D>::PV_PARTS;
  constexpr int DP = D / NP;
  static_assert(NP >= 1 && NP <= 4 && D % NP == 0, "P·V in one to four column parts");
  const uint32_t ones_addr = smem_u32(s_ones);
  // l: the float32 row sums of the unrounded weights (the LSE); lsum: the
  // sums of the rounded weights, from the tensor cores (the normalizer).
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, lsum[2] = {0.f, 0.f};
  float o[D / 2];  // O: the sum of the finished tiles
#pragma unroll
  for (int i = 0; i < D / 2; i++) o[i] = 0.f;
  float ot[DP / 2];  // one column part of one tile's P·V
  float lt[4];       // one tile's P·ones: its rows' sums
  float s[SN / 2];       // scores of tile t, then its weights P·2^8
  // The weights as wgmma A registers (E4M3), tile t's in pa[t % 2], so that
  // they are packed while P·V still reads the previous tile's.
  using PA = uint32_t[SN / 32][4];
  PA pa[2];
  // ONEPA: pa[0] alone (HopperTiles<D>::ONE_PA).
  constexpr bool ONEPA = !ONE && NP == 1 && HopperTiles<D>::ONE_PA;

  // S = Q·K(t)ᵀ, issued (not waited for).
  auto issue_qk = [&](int t) {
    const int st = t % RING;
    mbar_wait(&k_full[st], (t / RING) & 1);
    const uint32_t k_addr = smem_u32(s_k + st * G::KT);
    wg_fence();
    // The k steps that hold head-dim columns: the image's zero columns
    // past D (D 96 and 192, padded to DK 128 and 256) add nothing to a
    // score, so they are not multiplied.
    constexpr int KSTEPS = (D + 31) / 32;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; kk++) {
      const int panel = 32 * kk / WK, off = 32 * kk % WK;
      WGMMA<SN>::ss(s, desc<WK>(q_addr + panel * 64 * WK + off), desc<WK>(k_addr + panel * BN * WK + off), kk);
    }
    wg_commit();
  };
  // P(t)·V(t) (its column part `part`: V's transposed rows DP·part ..
  // +DP-1), issued (not waited for), P from a: into ot (the first k step
  // overwrites it); with part 0, P(t)·ones into lt. A block of ones in any layout is all ones: its
  // descriptor only has to stay inside it.
  auto fence_pv = [&]() {
    fence_regs(ot);
    fence_regs(lt);
  };
  auto issue_pv = [&](int t, const PA& a, auto part) {
    constexpr int P = decltype(part)::value;
    const int st = t % RING;
    if (P == 0) mbar_wait(&v_full[st], (t / RING) & 1);
    const uint32_t v_addr = smem_u32(s_v + st * G::VT) + P * DP * BN;
    fence_pv();
    wg_fence();
#pragma unroll
    for (int k = 0; k < BN / 32; k++) {
      WGMMA<DP>::rs(ot, a[k], desc<WV>(v_addr + 32 * k), k > 0);
      if constexpr (P == 0) WGMMA<8>::rs(lt, a[k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
    wg_commit();
  };
  // The online softmax of tile t on s (softmax_tile) and P's packing
  // (pack_weights): hopper/softmax.cuh.
  auto softmax = [&](int t) { return softmax_tile<SN>(s, m, l, c, t, tq, vis0, vis1, vis_min); };
  auto pack_p = [&](PA& a) { pack_weights<SN>(s, a); };
  // Ping-pong (PINGPONG): the two consumer warpgroups take turns to issue
  // their GEMMs (barriers 1 and 2), so that one's softmax runs under the
  // other's GEMMs; or (SOFTMAX_TURNS) to run their softmaxes (barriers 3
  // and 4). The one-tile form has one consumer warpgroup.
  constexpr bool SMTURNS = !ONE && HopperTiles<D>::SOFTMAX_TURNS;
  constexpr bool PINGPONG = !ONE && HopperTiles<D>::PINGPONG;
  static_assert(!(SMTURNS && PINGPONG), "turns on barriers 1-4: one protocol at a time");
  const Turns<PINGPONG, 1> gemm_turns{cw};
  const Turns<SMTURNS, 3> softmax_turns{cw};
  // The softmax's arithmetic stays inside its turn.
  auto softmax_turn = [&]() {
    softmax_turns.take();
    if constexpr (SMTURNS) fence_regs(s);
  };
  auto softmax_done = [&]() {
    if constexpr (SMTURNS) fence_regs(s);
    softmax_turns.pass();
  };
  auto release = [&](int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[t % RING]);
  };

  if (ONE && ntiles > 0) {
    // One tile of 2·BN keys (tiles 0 and 1 in ring slots 0 and 1, on slot
    // 0's barriers): S, its softmax from m = -Inf (no rescale), then P·V
    // and P·ones in two halves of BN keys, V's two tiles: the second half
    // into ot, added to the first in float32, as the tiled kernel adds its
    // tiles (the same rounding of each tile's sums by the tensor cores); the
    // row sums' halves likewise.
    if (!QC) mbar_wait(q_full, 0);
    if (QC) mbar_wait(&k_full[0], 0);
    QP_STAMP(QC && threadIdx.x == 128, 1, 0);
    issue_qk(0);
    wg_wait<0>();
    fence_regs(s);
    softmax(0);
    pack_p(pa[0]);
    fence_regs(pa[0]);
    QP_STAMP(QC && threadIdx.x == 128, 1, 6);
    mbar_wait(&v_full[0], 0);
    const uint32_t v_addr = smem_u32(s_v);
    const uint32_t v2_addr = v_addr + G::VT;
    // B of k step kk (keys 32kk .. 32kk+31) of P·V: the V image's tiles of
    // BN keys, or QC's sub-tiles of ONE_BM keys (64-byte rows).
    auto v_desc = [&](int kk) {
      if constexpr (QC) {
        constexpr int per = G::ONE_BM / 32;
        return desc<G::ONE_BM>(v_addr + kk / per * (G::ONE_BM * D) + 32 * (kk % per));
      } else {
        return desc<WV>((kk < BN / 32 ? v_addr : v2_addr) + 32 * (kk % (BN / 32)));
      }
    };
    float lt2[4];
    fence_regs(o);
    fence_pv();
    fence_regs(lt2);
    wg_fence();
#pragma unroll
    for (int k = 0; k < BN / 32; k++) {
      WGMMA<D>::rs(o, pa[0][k], v_desc(k), k > 0);
      WGMMA<8>::rs(lt, pa[0][k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
#pragma unroll
    for (int k = 0; k < BN / 32; k++) {
      WGMMA<DP>::rs(ot, pa[0][BN / 32 + k], v_desc(BN / 32 + k), k > 0);
      WGMMA<8>::rs(lt2, pa[0][BN / 32 + k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
    wg_commit();
    wg_wait<0>();
    fence_regs(o);
    fence_pv();
    fence_regs(lt2);
#pragma unroll
    for (int i = 0; i < D / 2; i++) o[i] += ot[i];
    lsum[0] = lt[0] + lt2[0];
    lsum[1] = lt[2] + lt2[2];
  } else if (ntiles > 0) {
    // Warpgroup 0 goes first; every turn taken is passed on, and warpgroup
    // 0 takes one more at the end, so that every barrier ends balanced.
    auto stamp = [&](int t, int slot) { loop_stamp(tid == 0, cw, t, slot); };
    if (cw == 1) {
      gemm_turns.pass();
      softmax_turns.pass();
    }
    mbar_wait(q_full, 0);
    stamp(0, 2);
    gemm_turns.take();
    stamp(0, 3);
    issue_qk(0);
    gemm_turns.pass();
    stamp(0, 4);
    wg_wait<0>();
    fence_regs(s);
    stamp(0, 5);
    softmax_turn();
    float2 alpha = softmax(0);  // o is zero: rescaling it changes nothing
    softmax_done();
    float2 alpha_pv = alpha;    // the factors of the tile whose P·V is in flight
    PROFILE_ONLY(fence_regs(s));
    stamp(0, 6);
    pack_p(pa[0]);
    stamp(0, 7);
    // fold adds a finished tile's P·V (its column part `part`) and row
    // sums (with part 0) to o and lsum, rescaled by that tile's factors
    // first: o·alpha + ot, in float32. Column part p is o[p·DP/2 ..]
    // (wmma.WGMMAAcc: 4 registers per 8 columns).
    auto fold = [&](auto part) {
      constexpr int P = decltype(part)::value;
#pragma unroll
      for (int i = 0; i < DP / 2; i++) {
        float& x = o[P * (DP / 2) + i];
        x = fmaf(x, (i & 2) ? alpha_pv.y : alpha_pv.x, ot[i]);
      }
      if constexpr (P == 0) {
        lsum[0] = fmaf(lsum[0], alpha_pv.x, lt[0]);
        lsum[1] = fmaf(lsum[1], alpha_pv.y, lt[2]);
      }
    };
    // finish: the wait for every wgmma issued (at a step's start, the last
    // part of P(t-2)·V(t-2)), folded at once. (Issuing Q·K(t)ᵀ before that
    // fold measured slower, 707 against 747 TFLOP/s at D 128: the fold
    // then delays P(t-1)·V(t-1), which needs ot back; docs/design/hopper-prefill.md.)
    auto finish = [&]() {
      wg_wait<0>();
      fence_pv();
    };
    // With NP column parts, part p + 1 is issued once the softmax is done
    // and part p folded (next_part). (Ping-pong takes no turn for them.)
    auto next_part = [&](const PA& a, int t, auto part) {
      wg_wait<0>();
      fence_pv();
      fold(part);
      issue_pv(t, a, Part<decltype(part)::value + 1>{});
    };
    auto later_parts = [&](const PA& a, int t) {
      if constexpr (NP >= 2) next_part(a, t, Part<0>{});
      if constexpr (NP >= 3) next_part(a, t, Part<1>{});
      if constexpr (NP >= 4) next_part(a, t, Part<2>{});
    };
    // Intra-warpgroup overlap: Q·K(t)ᵀ and P(t-1)·V(t-1) are issued
    // together, and the softmax of tile t (and its packing into next, the
    // P registers the running P·V does not read) runs while P·V is on the
    // tensor cores. Each step begins with the wait for P(t-2)·V(t-2), so
    // that the wait starts a basic block: ptxas hoists a wait to the top of
    // its block, and a wait after the softmax in the same block would be
    // scheduled before it (docs/design/hopper-prefill.md). The fences keep the
    // compiler from sinking the softmax below that wait. (The later column
    // parts' waits, NP > 1, follow the softmax in its block.)
    auto step = [&](int t, const PA& prev, PA& next) {
      stamp(t, 0);
      if constexpr (!ONEPA) {
        finish();
        stamp(t, 1);
        if (t >= 2) {
          release(t - 2);
          fold(Part<NP - 1>{});
        }
      }
      stamp(t, 2);
      gemm_turns.take();
      stamp(t, 3);
      issue_qk(t);
      issue_pv(t - 1, prev, Part<0>{});
      alpha_pv = alpha;
      gemm_turns.pass();
      stamp(t, 4);
      wg_wait<1>();
      fence_regs(s);
      stamp(t, 5);
      softmax_turn();
      alpha = softmax(t);
      softmax_done();
      PROFILE_ONLY(fence_regs(s));
      stamp(t, 6);
      if constexpr (ONEPA) {  // P(t-1)·V(t-1) done before P(t) takes its registers
        finish();
        release(t - 1);
        fold(Part<0>{});
      }
      pack_p(next);
      fence_regs(next);
      fence_regs(s);
      later_parts(prev, t - 1);
      stamp(t, 7);
    };
    // Unrolled by two, so that the P buffers are registers named
    // statically; tile t's weights are in pa[t % 2].
    for (int t = 1; t < ntiles; t += 2) {
      if constexpr (ONEPA) {
        step(t, pa[0], pa[0]);
        if (t + 1 < ntiles) step(t + 1, pa[0], pa[0]);
      } else {
        step(t, pa[0], pa[1]);
        if (t + 1 < ntiles) step(t + 1, pa[1], pa[0]);
      }
    }
    if constexpr (!ONEPA) {
      finish();
      if (ntiles >= 2) {
        release(ntiles - 2);
        fold(Part<NP - 1>{});
      }
    }
    gemm_turns.take();
    // The last tile's weights, in registers named statically (a reference
    // chosen at run time would put pa in local memory).
    auto last = [&](const PA& a) {
      issue_pv(ntiles - 1, a, Part<0>{});
      alpha_pv = alpha;
      gemm_turns.pass();
      later_parts(a, ntiles - 1);
    };
    if (!ONEPA && (ntiles - 1) % 2) last(pa[1]);
    else last(pa[0]);
    finish();
    release(ntiles - 1);
    fold(Part<NP - 1>{});
    if (cw == 0) {
      gemm_turns.take();
      softmax_turns.take();
    }
  }

  if constexpr (QC) {  // every share has landed here (without a tile, too)
    mbar_wait(&k_full[0], 0);
    mbar_wait(&v_full[0], 0);
    cluster_arrive();
    vs = one_tile_v_scale<D>();
  }

  // Epilogue: the quad's partial row sums, then rows r0 and r0 + 8.
  QP_STAMP(FUSED && threadIdx.x == 128, 1, 3);
  epilogue<D>(p, o, m, l, lsum, vs, b, h, r0, tq, sq);
  QP_STAMP(FUSED && threadIdx.x == 128, 1, 4);
  if constexpr (QC) cluster_wait();  // no block exits while its shares may still be read
}
