// ada.cuh: stage 10, the Ada kernel (sm_89): both GEMMs on the FP8 tensor
// cores through mma.sync m16n8k32 e4m3 (QMMA in sm_89 SASS), in the
// FlashAttention-2 structure. Included by attention.cu for compute_89 only.
//
// Design:
//
//   * A block is WARPS warps of 16 query rows; all its rows belong to one KV
//     head: the query heads of the group are packed with positions (pack_of,
//     internal/tiles.AdaConfig.Pack), head-major, so each K/V tile the block
//     loads serves every query head that reads it (GQA/MQA packing).
//   * The warps share tiles of BN keys in a RING-deep cp.async ring in
//     dynamic shared memory, one block barrier per tile: K as BN rows of
//     KPITCH bytes, V transposed as D rows of VPITCH bytes (pitches are odd
//     numbers of 16-byte chunks: ldmatrix's eight rows hit eight different
//     bank groups).
//   * V comes from its image (pack_v_image, written once per upload by
//     fp8attn_pack10v): per tile D rows of BN bytes, the keys of each
//     16-key group in sigma order, so that P goes from the Q·Kᵀ accumulators
//     to the A fragments of P·V with conversions only (common.cuh).
//   * Q is loaded once into A fragments (D/32 x 4 registers: plain 32-bit
//     loads of FP8 bytes); a negative score factor is folded in by flipping
//     the codes' sign bits, so the row maxima are taken on raw scores.
//   * Q·Kᵀ: per 8-key n-tile, K's B fragments by ldmatrix.x4 (a b16 row of
//     ldmatrix is 16 FP8 bytes: exactly a B register pair's bytes for one
//     key), two k32 steps per ldmatrix.
//   * Softmax on the accumulators: row max over a quad, kept on raw scores;
//     P·2^8 = exp2(s·c - m·c + 8), one FFMA and one EX2 a weight, so that
//     E4M3 uses its range (P <= 1 becomes <= 256 < 448); the row sums stay
//     per thread in float32 and meet their quad only at the end; the
//     online-softmax step (alpha, the rescale of O and the row sums, the
//     exponent's offset) runs only when a row's maximum moved (warp vote).
//   * The main loop is unrolled by the ring depth, so that every shared
//     memory offset of a step is a constant.
//   * P·V: P packed to E4M3 (cvt.rn.satfinite.e4m3x2.f32, two a register
//     half), V's B fragments by ldmatrix.x4 from the transposed tile.
//   * Causal masks: blocks with the most keys run first; the mask is
//     applied only on tiles some row of the block does not fully see.
//   * Attention variants (Params' window, softcap, sinks), in twin entry
//     points so that the plain kernel keeps its main loop: WINDOW
//     (fp8attn_stage10w_d<D>) starts the block at the key tile of its
//     lowest position's first key (first_key), so the tiles before it are
//     neither loaded nor computed, and also runs the mask on the tiles below
//     its highest position's first key, with a lower bound per row; SOFTCAP
//     (fp8attn_stage10c_d<D>, with WINDOW) caps the scores before the mask;
//     the sinks join the normalizers in the epilogue of every entry, the
//     LSE staying over the keys.
#pragma once

// Each row is normalized by the sum of the E4M3 weights the tensor cores
// multiplied (one more mma a k32 step: P times B registers of E4M3 ones),
// instead of the float32 sum of the unrounded weights, which stays for the
// LSE. The output is then a weighted mean of V's rows, and rounding P moves
// it by at most 2^-4 of V's range; with the unrounded sum, values of one
// sign measured 1.34-1.58x the input-quantization error on the H200
// (docs/ACCURACY.md).

namespace ada {

template <int D> struct Geometry {
  using T = AdaTiles<D>;
  static constexpr int BM = T::BM, BN = T::BN, WARPS = T::WARPS, RING = T::RING;
  static constexpr int KP = T::KPITCH, VP = T::VPITCH, TILE = T::TILE;
  static constexpr int THREADS = 32 * WARPS;
  static constexpr int KS = D / 32;   // k32 steps of Q·Kᵀ
  static constexpr int NT = BN / 8;   // n8 tiles of a score tile
  static constexpr int PS = BN / 32;  // k32 steps of P·V
  static constexpr int DT = D / 8;    // n8 tiles of the output
  static_assert(BM == 16 * WARPS && TILE == BN * KP + D * VP && T::SMEM == RING * TILE, "tiles.h");
  static_assert(D % 32 == 0 && BN % 32 == 0 && RING >= 2, "k32 steps, ring depth");
  static_assert((BN * D / 16) % THREADS == 0, "whole copy rounds");
};

// pack_of is internal/tiles.AdaConfig.Pack: a block's BM rows are heads
// query heads (a chunk of the group) times positions positions, head-major;
// chunks head chunks cover the group.
struct Pack {
  int heads, positions, chunks;
};
__device__ __forceinline__ Pack pack_of(int group, int sq, int bm) {
  Pack k;
  k.heads = min(group, bm);
  k.positions = min(bm / k.heads, sq);
  k.chunks = (group + k.heads - 1) / k.heads;
  return k;
}

// Slot<S> names ring slot S at compile time (the main loop's steps).
template <int S> struct Slot {
  static constexpr int value = S;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}

// mma is one mma.sync m16n8k32 e4m3 x e4m3 -> f32, c += a·b.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// chunk_at is the shared-memory offset of chunk tid + i·T (16 bytes) of a
// tile whose rows are W bytes stored P bytes apart: a per-thread base plus a
// compile-time step where T is a multiple of the chunks per row.
template <int W, int P, int T> __device__ __forceinline__ int chunk_at(int tid, int i) {
  constexpr int C = W / 16;
  if constexpr (T % C == 0) {
    return (tid / C + i * (T / C)) * P + 16 * (tid % C);
  } else {
    const int ch = tid + i * T;
    return (ch / C) * P + 16 * (ch % C);
  }
}

// The V image of the Ada kernel: unswizzled tiles of D x BN.
template <int D> __device__ __forceinline__ void pack_v(const Params& p) {
  pack_v_image<D, Geometry<D>::BN>(p, [](int o) { return o; });
}

// stage10 is the Ada kernel. WINDOW bounds the rows' keys from below by
// Params' window (without it the window is not read: the plain kernel's
// main loop holds no lower bound); SOFTCAP caps the scores by Params'
// softcap. The sinks, Params' too, are read by every form.
template <int D, bool WINDOW = false, bool SOFTCAP = false> __device__ __forceinline__ void stage10(const Params& p) {
  using G = Geometry<D>;
  constexpr int BN = G::BN, RING = G::RING, KP = G::KP, VP = G::VP, KS = G::KS, NT = G::NT, PS = G::PS, DT = G::DT;
  extern __shared__ __align__(16) uint8_t smem[];

  const int group = (int)p.group, sq = (int)p.sq, sk = (int)p.sk;
  // The problem's head dim: D, or a multiple of 16 below it, whose columns
  // past dk the kernel reads as zeros (Q's fragments, K's copies, the V
  // image's rows) and never writes.
  const int dk = (int)p.d;
  const Pack pk = pack_of(group, sq, G::BM);
  const int pblocks = (sq + pk.positions - 1) / pk.positions;
  const int chunk = (int)blockIdx.x % pk.chunks;
  int pb = (int)blockIdx.x / pk.chunks;
  if (p.mask) pb = pblocks - 1 - pb;  // the blocks with the most keys first
  const int kvh = blockIdx.y, b = blockIdx.z;
  const int pos0 = pb * pk.positions, pos1 = min(pos0 + pk.positions, sq) - 1;
  // The block's rows see keys from the first key of its first position (the
  // smallest: every query head of the block shares the positions; 0
  // without WINDOW) up to those its last position sees: key tiles tb .. tb
  // + ntiles - 1, loaded and computed as tiles 0 .. ntiles - 1 of the loops
  // below, whose keys are counted from k0 (the copies' sources, the rows'
  // bounds). The block's first position sees the fewest keys, its last the
  // latest first key.
  const int tb = WINDOW ? first_key(p, pos0) / BN : 0, k0 = tb * BN;
  const int ntiles = max(0, (visible_keys(p, pos1) + BN - 1) / BN - tb);
  const int vis_min = visible_keys(p, pos0), lo_max = WINDOW ? first_key(p, pos1) : 0;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  // This thread's rows g and g + 8 of the warp: (query head, position), and
  // the keys lo .. vis - 1 each sees, counted from k0 (lo: WINDOW only).
  int qh[2], pos[2], lo[2], vis[2];
  bool valid[2];
  float c[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = 16 * warp + g + 8 * h, hl = r / pk.positions;
    const int head = chunk * pk.heads + hl;
    pos[h] = pos0 + r % pk.positions;
    valid[h] = hl < pk.heads && head < group && pos[h] < sq;
    qh[h] = kvh * group + (valid[h] ? head : 0);
    lo[h] = valid[h] ? first_key(p, pos[h]) - k0 : 0;
    vis[h] = valid[h] ? visible_keys(p, pos[h]) - k0 : 0;
    // The score factor, positive (Q's signs flipped below where it is not)
    // and at least the smallest normal float, so that -Inf·c stays -Inf.
    c[h] = fmaxf(fabsf(p.score_scale[b * p.hq + qh[h]]), 1.17549435e-38f);
  }
  // SOFTCAP: a score s becomes tanh(s·cap_in) (cap_in the score factor over
  // the cap in the log2 domain, at most FLT_MAX so that a zero score stays
  // 0 under a subnormal cap), which the row maxima are taken on, and c the
  // cap in the log2 domain (at least the smallest normal float, as above):
  // the capped score in the log2 domain is c·tanh(s·cap_in).
  float cap_in[2] = {0.f, 0.f};
  if constexpr (SOFTCAP) {
    const float cap = fmaxf(p.softcap * LOG2E, 1.17549435e-38f);
#pragma unroll
    for (int h = 0; h < 2; h++) {
      cap_in[h] = fminf(c[h] / cap, 3.40282347e38f);
      c[h] = cap;
    }
  }
  const bool active = __any_sync(0xffffffffu, valid[0] || valid[1]);

  // Q as mma.m16n8k32 e4m3 A fragments: register r holds row g + 8(r&1),
  // columns 32kk + 16(r>>1) + 4t .. +3 (wmma.MMAE4M3A); zeros past dk (a
  // multiple of 16).
  uint32_t qa[KS][4];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint8_t* qrow = p.q + b * p.q_batch_stride + qh[h] * p.q_head_stride + (long long)pos[h] * p.q_row_stride;
    const uint32_t flip = p.score_scale[b * p.hq + qh[h]] < 0.f ? 0x80808080u : 0u;
#pragma unroll
    for (int kk = 0; kk < KS; kk++)
#pragma unroll
      for (int hi = 0; hi < 2; hi++)
        qa[kk][h + 2 * hi] = valid[h] && 32 * kk + 16 * hi < dk ? *(const uint32_t*)(qrow + 32 * kk + 16 * hi + 4 * tq) ^ flip : 0u;
  }

  // K and V from key k0 (key tile tb) on.
  const uint8_t* kbase = p.k + b * p.kv_batch_stride + kvh * p.kv_head_stride + (long long)k0 * p.kv_row_stride;
  const uint8_t* vimg = p.vi + (((long long)b * p.hkv + kvh) * ((sk + BN - 1) / BN) + tb) * (D * BN);
  // Copies of tile t (key tile tb + t) into ring slot `slot`: chunk ch =
  // threadIdx.x + i·THREADS of 16 bytes. K: row ch / (D/16), byte 16(ch %
  // (D/16)); where K's rows are dense (row stride D, as in [B][H][S][D])
  // and the tile lies inside sk, chunk ch is simply byte 16ch of the tile,
  // and each copy is one instruction off a per-tile pointer; otherwise rows
  // past sk (kend keys from k0), and columns past dk, are zero-filled. V:
  // the image tile is contiguous, chunk ch at byte 16ch. dense_tiles counts
  // the tiles that take the one-instruction path.
  const int dense_tiles = (p.kv_row_stride == D && dk == D ? sk / BN : 0) - tb, kend = sk - k0;
  const uint8_t* ksrc = kbase + 16 * threadIdx.x;  // this thread's first chunk of K and of V
  const uint8_t* vsrc = vimg + 16 * threadIdx.x;
  constexpr int CPT = BN * D / 16 / G::THREADS;  // chunks per thread, each of K and V
  auto load = [&](int t, int slot_off) {
    uint8_t* ks = smem + slot_off;
    uint8_t* vs = ks + BN * KP;
    const int j0 = t * BN;
    if (t < dense_tiles) {
      const uint8_t* src = ksrc + (long long)j0 * D;
#pragma unroll
      for (int i = 0; i < CPT; i++) {
        cp_async16(ks + chunk_at<D, KP, G::THREADS>(threadIdx.x, i), src + 16 * G::THREADS * i, true);
      }
    } else {
#pragma unroll
      for (int i = 0; i < CPT; i++) {
        const int ch = threadIdx.x + i * G::THREADS, r = ch / (D / 16), off = 16 * (ch % (D / 16)), j = j0 + r;
        const bool ok = j < kend && off < dk;
        cp_async16(ks + r * KP + off, kbase + (ok ? (long long)j * p.kv_row_stride + off : 0), ok);
      }
    }
    const uint8_t* vt = vsrc + (long long)t * (D * BN);
#pragma unroll
    for (int i = 0; i < CPT; i++) {
      cp_async16(vs + chunk_at<BN, VP, G::THREADS>(threadIdx.x, i), vt + 16 * G::THREADS * i, true);
    }
  };

  // m is the running maximum of a row's raw scores (its score factor c > 0
  // applies after: max(s)·c = max(s·c) exactly; SOFTCAP: of its capped
  // scores tanh(s·cap_in), c the cap). It starts at -FLT_MAX, not
  // -Inf: finite, so that the online step needs no test for a row that has
  // seen only masked keys (alpha = 2^((-FLT_MAX - m)·c) is 0 for any score m,
  // and a row that has seen no key keeps O and l at 0). off = 8 - m·c is kept
  // beside m, as it changes only when m does, clamped to FLT_MAX: while no
  // key is seen (m = -FLT_MAX, and -FLT_MAX·c is -Inf for c > 1, as a cap
  // or large scales give), masked keys' weights 2^(-Inf·c + off) must be 0,
  // not 2^(-Inf + Inf), NaN.
  float m[2] = {-3.40282347e38f, -3.40282347e38f}, l[2] = {0.f, 0.f}, off[2] = {3.40282347e38f, 3.40282347e38f};
  // lsum: P·ones, the sums of the rounded weights (the normalizer): every
  // column of the accumulator holds its row's sum; 0 and 2 are read.
  float lsum[4] = {0.f, 0.f, 0.f, 0.f};
  constexpr uint32_t ONES = 0x38383838u;  // four E4M3 1.0
  float o[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
#pragma unroll
    for (int j = 0; j < 4; j++) o[dt][j] = 0.f;

  // ldmatrix lane addressing: lane l gives the row address of matrix l/8,
  // row l%8. Per-thread bases of the fragments' rows in ring slot 0: K
  // (matrix lm: bytes 16lm of a 64-byte column block; for the x2 of an odd
  // k32 step, 16(lm&1)), V (16-key chunk lm; for 32-key tiles, n-tile
  // +(lm>>1), chunk lm&1).
  const int lr = lane & 7, lm = lane >> 3;
  const uint32_t base = smem_u32(smem);
  const uint32_t kq = base + lr * KP + 16 * lm, kq2 = base + lr * KP + 16 * (lm & 1);
  const uint32_t vq = PS == 2 ? base + BN * KP + lr * VP + 16 * lm : base + BN * KP + (8 * (lm >> 1) + lr) * VP + 16 * (lm & 1);
  // The mask is applied from the first tile some row of the block does not
  // fully see on (mask_from), and, WINDOW, on the tiles below the block's
  // last position's first key (mask_below: those holding some row's lower
  // window edge).
  const int mask_from = vis_min / BN - tb, mask_below = (lo_max - k0 + BN - 1) / BN;

  // Tile t in ring slot S = t % RING (a compile-time constant: the loop
  // below is unrolled RING times, so every shared-memory offset of a step
  // folds into its instructions). It waits for tile t, meets the block
  // (every warp is then done with tile t-1's slot), starts the copy of tile
  // t + RING - 1 into that slot, and computes tile t.
  auto step = [&](int t, auto slot) {
    constexpr int S = decltype(slot)::value, cur = S * G::TILE, ahead = ((S + RING - 1) % RING) * G::TILE;
    cp_async_wait<RING - 2>();
    __syncthreads();
    if (t + RING - 1 < ntiles) load(t + RING - 1, ahead);
    cp_async_commit();
    // A warp with no rows of its own still copies its share and meets every
    // barrier, at the same instruction (a loop of its own broke synccheck's
    // rule that a block meets a barrier at one instruction).
    if (!active) return;

    // S = Q·Kᵀ: n-tile n holds keys 8n..8n+7; element j is row g + 8(j>>1),
    // key 8n + 2t + (j&1) (wmma.MMAC).
    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) {
#pragma unroll
      for (int j = 0; j < 4; j++) s[n][j] = 0.f;
      // Matrix lm of ldmatrix: key 8n + lr, bytes 16lm .. +15 of a 64-byte
      // column block: B registers of two k32 steps.
#pragma unroll
      for (int kp = 0; kp < KS / 2; kp++) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(kq + cur + 8 * n * KP + 64 * kp, b0, b1, b2, b3);
        mma(s[n], qa[2 * kp], b0, b1);
        mma(s[n], qa[2 * kp + 1], b2, b3);
      }
      if constexpr (KS % 2) {
        uint32_t b0, b1;
        ldsm_x2(kq2 + cur + 8 * n * KP + 64 * (KS / 2), b0, b1);
        mma(s[n], qa[KS - 1], b0, b1);
      }
    }

    // SOFTCAP: the scores capped (cap_in above), before the mask, so that
    // a masked key stays -Inf.
    if constexpr (SOFTCAP) {
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int j = 0; j < 4; j++) s[n][j] = tanh_approx(s[n][j] * cap_in[j >> 1]);
    }
    // Keys a row does not see (below its window, past its causal edge, and
    // keys past sk, zero rows in the tile) become -Inf, only on tiles some
    // row of the block does not fully see.
    if (t >= mask_from || (WINDOW && t < mask_below)) {
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int key = t * BN + 8 * n + 2 * tq + (j & 1);
          if (key >= vis[j >> 1] || (WINDOW && key < lo[j >> 1])) s[n][j] = NEG_INF;
        }
    }
    float mx[2] = {fmaxf(s[0][0], s[0][1]), fmaxf(s[0][2], s[0][3])};
#pragma unroll
    for (int n = 1; n < NT; n++) {
      mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
    }
    // The online-softmax step (common.cuh's online_step without its test
    // for -Inf, m being finite), taken only when some row of the warp has a
    // new maximum (warp vote): alpha = 2^((m - m_new)·c) <= 1 on the SFU (a
    // flushed subnormal alpha only drops weights below 2^-126 of the new
    // maximum) rescales O and the row sums, and off moves with m.
    float m_new[2];
    bool moved = false;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      m_new[h] = fmaxf(m[h], group_max<4>(mx[h]));
      moved |= m_new[h] != m[h];
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float alpha = ex2((m[h] - m_new[h]) * c[h]);
        l[h] *= alpha;
        lsum[2 * h] *= alpha;
        off[h] = fminf(8.f - m_new[h] * c[h], 3.40282347e38f);  // P·2^8 = exp2(s·c - m·c + 8)
        m[h] = m_new[h];
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
          o[dt][2 * h] *= alpha;
          o[dt][2 * h + 1] *= alpha;
        }
      }
    }
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        s[n][j] = ex2(fmaf(s[n][j], c[j >> 1], off[j >> 1]));
        l[j >> 1] += s[n][j];
      }
    // P as A fragments of P·V step k (keys 32k..32k+31 in sigma order):
    // register r holds row g + 8(r&1), n-tiles 4k + 2(r>>1) and +1, their
    // elements 2(r&1) and +1 (wmma.AccToE4M3A).
    uint32_t pa[PS][4];
#pragma unroll
    for (int k = 0; k < PS; k++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const int n = 4 * k + 2 * (r >> 1), e = 2 * (r & 1);
        pa[k][r] = pack4(s[n][e], s[n][e + 1], s[n + 1][e], s[n + 1][e + 1]);
      }
#pragma unroll
    for (int k = 0; k < PS; k++) mma(lsum, pa[k], ONES, ONES);
    // O += P·V: the transposed tile's row d = 8dt + lr, 16-key chunks.
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
      if constexpr (PS == 2) {
        uint32_t b0, b1, b2, b3;
        ldsm_x4(vq + cur + 8 * dt * VP, b0, b1, b2, b3);
        mma(o[dt], pa[0], b0, b1);
        mma(o[dt], pa[1], b2, b3);
      } else if (dt % 2 == 0) {  // PS == 1: one ldmatrix.x4 serves two n-tiles
        uint32_t b0, b1, b2, b3;
        ldsm_x4(vq + cur + 8 * dt * VP, b0, b1, b2, b3);
        mma(o[dt], pa[0], b0, b1);
        mma(o[dt + 1], pa[0], b2, b3);
      }
    }
  };

#pragma unroll
  for (int s = 0; s < RING - 1; s++) {
    if (s < ntiles) load(s, s * G::TILE);
    cp_async_commit();
  }
  for (int t0 = 0; t0 < ntiles; t0 += RING) {
    step(t0, Slot<0>{});
    if (t0 + 1 < ntiles) step(t0 + 1, Slot<1>{});
    if constexpr (RING > 2) {
      if (t0 + 2 < ntiles) step(t0 + 2, Slot<2>{});
    }
    static_assert(RING <= 3, "the loop unrolls up to three slots");
  }
  cp_async_wait<0>();

  // Epilogue: the quad's partial row sums, then rows g and g + 8. A sink's
  // weight joins the normalizer in its units, 2^(sink - m·c + 8) = 2^(sink
  // + off) (sink in the log2 domain), only when there are sinks; the LSE
  // stays over the keys.
  const float vs = p.v_scale[b * p.hkv + kvh];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const float lh = group_sum<4>(l[h]);
    if (!valid[h]) continue;
    const bool keys = row_has_keys(lh);
    float den = lsum[2 * h];
    if (p.sinks) den += ex2(fmaf(p.sinks[qh[h]], LOG2E, off[h]));
    const float f = vs / den;
    float* orow = p.out + b * p.o_batch_stride + qh[h] * p.o_head_stride + (long long)pos[h] * p.o_row_stride;
#pragma unroll
    for (int dt = 0; dt < DT; dt++) {
      const float2 v = keys ? make_float2(o[dt][2 * h] * f, o[dt][2 * h + 1] * f) : make_float2(0.f, 0.f);
      if (8 * dt + 2 * tq < dk) *(float2*)(orow + 8 * dt + 2 * tq) = v;
    }
    if (p.lse && tq == 0) p.lse[(b * p.hq + qh[h]) * p.sq + pos[h]] = row_lse(m[h] * c[h] - 8.f, lh);
  }
}

}  // namespace ada
