// hopper/mainloop.cuh: a consumer warpgroup of stage9 (hopper/attention.cuh)
// between its set-up and its epilogue: the GEMM and softmax steps on its
// register state (Consumer), the one-tile form (Consumer::one_tile) and
// the tiled main loop (Consumer::main_loop). Included by hopper.cuh only,
// inside namespace hopper, in its order.
#pragma once

// Consumer is one consumer thread's view of its block: where the tiles
// land in shared memory and on which barriers, its rows' score factor and
// visible keys, and references to the register state stage9 holds (the
// scores s, one tile's P·V column part ot and row sums lt, the rows'
// running maxima m and float32 sums l), with the steps both forms take.
// ONE, QC, SOFTCAP, NARROW, FUSED and PAGED are stage9's. PAGED (the paged
// form, hopper/paged.cuh): each tile's K scale, from its slot's scales,
// times a row's c0 is the row's score factor in the tile; P·V reads V's blocks with descriptors of
// 32-byte rows; and O is kept in units of the latest tile's V scale
// (vunit), the fold taking the factor vunit(before)/vunit(after) beside
// alpha (its row sums alpha alone), so that the epilogue descales by vunit.
// HALF (the packed form's items whose rows fit one warpgroup,
// hopper/packed.cuh): both warpgroups hold the same rows, each the keys of
// its own half of every tile (kh), Q·Kᵀ on K's rows 64·kh .. and P·V over
// the tile's k32 steps of those keys, and their states merge before the
// epilogue (merge_halves).
template <int D, bool ONE, bool QC, bool SOFTCAP, bool NARROW, bool FUSED, bool PAGED = false, bool HALF = false,
          int R = HopperTiles<D>::RING>
struct Consumer {
  using G = Geometry<D, R>;
  static constexpr int BN = G::BN, RING = G::RING, WK = G::WK, WV = G::WV;
  // SN: the keys of one score tile.
  static constexpr int SN = ONE ? 2 * BN : HALF ? BN / 2 : BN;
  static_assert(!HALF || (PAGED && !ONE && BN % 64 == 0), "halves of the paged form's tiles, whole k32 steps each");
  // Promotion, the normalizer and the column parts: see hopper.cuh. P·V
  // runs in NP column parts of DP = D/NP columns
  // (HopperTiles<D>::PV_PARTS), one after the other into the same tile
  // accumulator.
  static constexpr int NP = ONE ? 1 : HopperTiles<D>::PV_PARTS;
  static constexpr int DP = D / NP;
  static_assert(NP >= 1 && NP <= 4 && D % NP == 0, "P·V in one to four column parts");
  // The weights as wgmma A registers (E4M3), tile t's in pa[t % 2], so that
  // they are packed while P·V still reads the previous tile's.
  using PA = uint32_t[SN / 32][4];
  // ONEPA: pa[0] alone (HopperTiles<D>::ONE_PA).
  static constexpr bool ONEPA = !ONE && NP == 1 && HopperTiles<D>::ONE_PA;
  // Ping-pong (PINGPONG): the two consumer warpgroups take turns to issue
  // their GEMMs (barriers 1 and 2), so that one's softmax runs under the
  // other's GEMMs; or (SMTURNS) to run their softmaxes (barriers 3 and 4).
  // Only a block of two consumer warpgroups (PAIRED) takes turns: the
  // one-tile and narrow forms have one. The fused form takes the GEMM
  // turns where HopperTiles<D>::FUSED_PINGPONG says so, and its key split
  // (stage9fs, grids of one wave) the tensor form's.
  static constexpr bool PAIRED = !ONE && !NARROW;
  static constexpr bool SMTURNS = PAIRED && HopperTiles<D>::SOFTMAX_TURNS;
  static constexpr bool PINGPONG = PAIRED && (FUSED ? HopperTiles<D>::FUSED_PINGPONG : HopperTiles<D>::PINGPONG);
  static_assert(!(SMTURNS && PINGPONG), "turns on barriers 1-4: one protocol at a time");

  uint8_t* s_k;
  uint8_t* s_v;
  uint64_t* k_full;
  uint64_t* v_full;
  uint64_t* empty;
  uint32_t q_addr, ones_addr;  // the warpgroup's Q block, the block of ones
  int lane, tq;
  RowKeys rk;  // the keys the thread's rows see
  int t0;      // the block's first tile: tile t of the loops is key tile t0 + t
  float c;       // the score factor (SOFTCAP: the cap in the log2 domain)
  float cap_in;  // (SOFTCAP: the score factor over the cap in the log2 domain)
  float (&s)[SN / 2];  // scores of tile t, then its weights P·2^8
  float (&ot)[DP / 2];  // one column part of one tile's P·V
  float (&lt)[4];       // one tile's P·ones: its rows' sums
  float (&m)[2];
  float (&l)[2];
  Turns<SMTURNS, 3> softmax_turns;
  float2 c0 = {0.f, 0.f};      // (PAGED: the rows' score factors without K's scale)
  float kmax = 0.f;            // (PAGED: the largest K scale of the tiles so far)
  uint32_t scales_addr = 0;    // (PAGED: the ring slots' tile scales, float2 each)
  float vunit = 0.f;           // (PAGED: O's unit, the latest tile's V scale; 0 before any)
  int kh = 0;                  // (HALF: the half of each tile's keys, 0 or 1)

  // (PAGED) tile t's scales: K's, V's.
  __device__ __forceinline__ float2 tile_scales(int t) const {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(scales_addr + 8 * (t % RING)) : "memory");
    return v;
  }
  // (PAGED) the fold factors of tile t's P·V: alpha times O's unit before
  // it over its V scale, which becomes the unit (a tile of scale 0, zeros
  // only, keeps it).
  __device__ __forceinline__ float2 to_unit(int t, float2 alpha) {
    const float vt = tile_scales(t).y;
    const float r = vt > 0.f && vunit > 0.f ? vunit / vt : 1.f;
    if (vt > 0.f) vunit = vt;
    return make_float2(alpha.x * r, alpha.y * r);
  }

  // S = Q·K(t)ᵀ, issued (not waited for).
  __device__ __forceinline__ void issue_qk(int t) {
    const int st = t % RING;
    mbar_wait(&k_full[st], (t / RING) & 1);
    uint32_t k_addr = smem_u32(s_k + st * G::KT);
    if constexpr (HALF) k_addr += kh * SN * WK;  // (the half's key rows)
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
  }
  // P(t)·V(t) (its column part P: V's transposed rows DP·P .. +DP-1),
  // issued (not waited for), P from a: into ot (the first k step
  // overwrites it); with part 0, P(t)·ones into lt. A block of ones in any
  // layout is all ones: its descriptor only has to stay inside it.
  __device__ __forceinline__ void fence_pv() {
    fence_regs(ot);
    fence_regs(lt);
  }
  template <int P> __device__ __forceinline__ void issue_pv(int t, const PA& a, Part<P>) {
    const int st = t % RING;
    if (P == 0) mbar_wait(&v_full[st], (t / RING) & 1);
    // (PAGED: the V blocks' rows are 32 bytes, a k32 step D rows apart.)
    const uint32_t v_addr = smem_u32(s_v + st * G::VT) + P * DP * (PAGED ? 32 : BN);
    const uint32_t v_half = HALF ? 32 * D * (kh * SN / 32) : 0;  // (HALF: the half's k32 steps)
    fence_pv();
    wg_fence();
#pragma unroll
    for (int k = 0; k < (HALF ? SN : BN) / 32; k++) {
      if constexpr (PAGED) WGMMA<DP>::rs(ot, a[k], desc<32>(v_addr + v_half + 32 * D * k), k > 0);
      else WGMMA<DP>::rs(ot, a[k], desc<WV>(v_addr + 32 * k), k > 0);
      if constexpr (P == 0) WGMMA<8>::rs(lt, a[k], desc<WV>(ones_addr + 32 * k), k > 0);
    }
    wg_commit();
  }
  // The online softmax of tile t on s (softmax_tile) and P's packing
  // (pack_weights): hopper/softmax.cuh.
  // SUMS: the float32 row sums l are taken (a call that asks for an LSE).
  template <bool SUMS> __device__ __forceinline__ float2 softmax(int t) {
    float2 cr = make_float2(c, c);
    if constexpr (PAGED) {  // (each factor floored as score_factor_of's)
      const float ks = tile_scales(t).x;
      kmax = fmaxf(kmax, ks);
      cr = make_float2(fmaxf(c0.x * ks, 1.17549435e-38f), fmaxf(c0.y * ks, 1.17549435e-38f));
    }
    // (HALF: the score tile's index in tiles of SN keys.)
    return softmax_tile<SN, SOFTCAP, SUMS, PAGED>(s, m, l, cr, cap_in, HALF ? 2 * (t0 + t) + kh : t0 + t, tq, rk);
  }
  __device__ __forceinline__ void pack_p(PA& a) { pack_weights<SN>(s, a); }
  // The softmax's arithmetic stays inside its turn.
  __device__ __forceinline__ void softmax_turn() {
    softmax_turns.take();
    if constexpr (SMTURNS) fence_regs(s);
  }
  __device__ __forceinline__ void softmax_done() {
    if constexpr (SMTURNS) fence_regs(s);
    softmax_turns.pass();
  }
  // release hands tile t's ring slot back to the producer.
  __device__ __forceinline__ void release(int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[t % RING]);
  }

  // SUMS: with the float32 row sums (softmax). stage9 picks the copy
  // outside the loop: a branch inside the softmax step changes how ptxas
  // places the wgmma waits (28% slower at D 64 in one build).
  template <bool SUMS> __device__ __forceinline__ void one_tile(uint64_t* q_full, float (&o)[D / 2], float (&lsum)[2], PA (&pa)[2]);
  template <bool SUMS>
  __device__ __forceinline__ void main_loop(uint64_t* q_full, int ntiles, int cw, int tid, float (&o)[D / 2], float (&lsum)[2],
                                            PA (&pa)[2]);
};

// one_tile is the one-tile form's consumer (stage9 with ONE): one tile of
// 2·BN keys (tiles 0 and 1 in ring slots 0 and 1, on slot 0's barriers):
// S, its softmax from m = -Inf (no rescale), then P·V and P·ones in two
// halves of BN keys, V's two tiles: the second half into ot, added to the
// first in float32, as the tiled kernel adds its tiles (the same rounding
// of each tile's sums by the tensor cores); the row sums' halves likewise.
// O and the row sums into o and lsum.
template <int D, bool ONE, bool QC, bool SOFTCAP, bool NARROW, bool FUSED, bool PAGED, bool HALF, int R>
template <bool SUMS>
__device__ __forceinline__ void Consumer<D, ONE, QC, SOFTCAP, NARROW, FUSED, PAGED, HALF, R>::one_tile(uint64_t* q_full, float (&o)[D / 2], float (&lsum)[2],
                                                                        PA (&pa)[2]) {
  if (!QC) mbar_wait(q_full, 0);
  if (QC) mbar_wait(&k_full[0], 0);
  QP_STAMP(QC && threadIdx.x == 128, 1, 0);
  issue_qk(0);
  wg_wait<0>();
  fence_regs(s);
  softmax<SUMS>(0);
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
}

// main_loop is the tiled kernel's consumer: the ntiles tiles (key tiles
// t0 .. t0 + ntiles - 1, in ring slots from 0) of consumer
// warpgroup cw (thread tid of it), O and its row sums into o and lsum,
// the weights in pa.
template <int D, bool ONE, bool QC, bool SOFTCAP, bool NARROW, bool FUSED, bool PAGED, bool HALF, int R>
template <bool SUMS>
__device__ __forceinline__ void Consumer<D, ONE, QC, SOFTCAP, NARROW, FUSED, PAGED, HALF, R>::main_loop(uint64_t* q_full, int ntiles, int cw, int tid,
                                                                         float (&o)[D / 2], float (&lsum)[2], PA (&pa)[2]) {
  const Turns<PINGPONG, 1> gemm_turns{cw};
  // Warpgroup 0 goes first; every turn taken is passed on, and warpgroup
  // 0 takes one more at the end, so that every barrier ends balanced.
  auto stamp = [&](int t, int slot) { loop_stamp(tid == 0, cw, t, slot); };
  if (cw == 1) {
    gemm_turns.pass();
    softmax_turns.pass();
  }
  if constexpr (!PAGED) mbar_wait(q_full, 0);  // (PAGED: the warpgroup's own codes, quantize_rows)
  QP_STAMP(tid == 0 && cw == 0, 1, 6);
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
  float2 alpha = softmax<SUMS>(0);  // o is zero: rescaling it changes nothing
  softmax_done();
  float2 alpha_pv = alpha;    // the factors of the tile whose P·V is in flight
  float2 alpha_o = alpha;     // (PAGED: O's, to_unit's)
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
    const float2 ao = PAGED ? alpha_o : alpha_pv;
#pragma unroll
    for (int i = 0; i < DP / 2; i++) {
      float& x = o[P * (DP / 2) + i];
      x = fmaf(x, (i & 2) ? ao.y : ao.x, ot[i]);
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
    if constexpr (PAGED) alpha_o = to_unit(t - 1, alpha);
    gemm_turns.pass();
    stamp(t, 4);
    wg_wait<1>();
    fence_regs(s);
    stamp(t, 5);
    softmax_turn();
    alpha = this->template softmax<SUMS>(t);
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
    if constexpr (PAGED) alpha_o = to_unit(ntiles - 1, alpha);
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
