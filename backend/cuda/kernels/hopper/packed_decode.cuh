// hopper/packed_decode.cuh: the packed form's items of at most DECODE_ROWS
// rows (a decode token's group of query heads), with the GEMMs' operands
// swapped. Included by hopper.cuh only, inside namespace hopper, after
// hopper/packed.cuh.
//
// A block's GEMMs on 64-row tiles spend a whole tile's tensor work and
// softmax on the few rows a decode token has (4 of 64 at Hq 32, Hkv 8).
// Swapped, the keys fill wgmma's M and the rows its N of 8: Sᵀ = K·Qᵀ
// (m64n8k32, A the K tile's 64 rows of the warpgroup's half, B the first 8
// rows of its Q block, both K-major in the 128-byte swizzle as they land),
// and Oᵀ = Vᵀ·Pᵀ (A the page's V blocks, D rows of 32 keys in the 32-byte
// swizzle as they land, one m64n8k32 for each 64 of D and k32 step; B
// Pᵀ, written by the threads into shared memory in the 32-byte swizzle:
// row j, the block's row, holds its weights in V's slot order). A tile
// costs its copies, not its tensor work: an eighth of the GEMMs' and of
// the softmax's.
//
// Each consumer warpgroup takes half of every tile's keys (as the HALF
// items, hopper/mainloop.cuh) and keeps its own state; the halves merge
// before the epilogue. A thread holds the scores of keys (in K's row
// order) 16·warp + g and + 8 of its half for rows 2·tq and 2·tq + 1
// (wmma.WGMMAAcc at N 8). A row's maximum spans the warpgroup: the
// warps' maxima meet in shared memory at a named barrier (11 + the
// warpgroup's index) once a tile; a second turn of it makes Pᵀ visible to
// the P·V. The rest is the HALF items'
// arithmetic: each row's score factor its own (quantize_rows) times the
// tile's K scale, P·2^8 = exp2(s·c - m + 8) in E4M3, O kept in units of
// the latest tile's V scale, each tile's P·V and P·ones (the normalizer,
// here ones from registers as A) into zeroed accumulators added to O in
// float32, the float32 sums of the unrounded weights for the LSE.

// DECODE_ROWS is the most rows an item the swapped GEMMs take may have
// (wgmma's N).
constexpr int DECODE_ROWS = 8;

// DecodeSmem is where a decode item's warpgroup keeps its own exchanges,
// inside its Q block past the 8 rows its Q·Kᵀ reads (1024 bytes):
// Pᵀ (the two k32 steps of its half of a tile, 256 bytes each) and the
// warps' row maxima (two buffers, a tile's parity each, of 4 warps × 8
// rows).
struct DecodeSmem {
  static constexpr uint32_t PT = 1024, MAXES = PT + 512, END = MAXES + 2 * 128;
};

// e4m3_pair is pack4's conversion of two weights (round to nearest,
// finite values saturated, NaN kept), a in the lowest byte, b above it.
__device__ __forceinline__ uint32_t e4m3_pair(float a, float b) {
  uint16_t h;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;\n" : "=h"(h) : "f"(a), "f"(b));
  return h;
}

// st_shared8 stores the lowest byte of v at shared address a.
__device__ __forceinline__ void st_shared8(uint32_t a, uint32_t v) {
  asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(a), "r"(v) : "memory");
}

// decode_item is consumer warpgroup cw's part (thread tid) of a packed
// block whose item pr has at most DECODE_ROWS rows: its half of the keys
// of tiles t0 .. t0 + ntiles - 1 (skc the sequence's keys), the halves'
// merge, the score factor's check (flag_rows) and warpgroup 0's epilogue.
// quantize_rows has encoded the item's rows into the warpgroup's Q block
// at q_addr (row scales at base's ROW_SCALES); the producer fills the
// paged form's ring (produce_paged). Every consumer warp releases every
// tile, as the main loop does.
template <int D>
__device__ __forceinline__ void decode_item(const Params& p, const TensorParams& tp, const PackedRows& pr, int cw, int tid, int t0,
                                            int ntiles, long long skc, uint8_t* s_k, uint8_t* s_v, uint64_t* k_full,
                                            uint64_t* v_full, uint64_t* empty, uint32_t q_addr, uint32_t base) {
  using G = Geometry<D, HopperTiles<D>::PAGED_RING>;
  constexpr int BN = G::BN, RING = G::RING, WK = G::WK, HN = BN / 2, MH = D / 64;
  static_assert(BN == 128 && G::DK == D && D % 64 == 0 && D % WK == 0, "halves of 64 keys, two k32 steps each; D in 64s");
  static_assert(DecodeSmem::END <= 64 * G::DK, "inside the warpgroup's Q block");
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  const uint32_t pt = q_addr + DecodeSmem::PT, maxes = q_addr + DecodeSmem::MAXES;
  const uint32_t scales = base + PagedSmem<D>::SCALES;
  auto bar = [&]() { asm volatile("bar.sync %0, 128;\n" ::"r"(11 + cw) : "memory"); };

  // The thread's rows 2·tq + e: their keys and score factors without K's
  // scale (quantize_rows' product, from the row's scale); a row past the
  // item's is taken as its last (its results are dropped).
  const int last = pr.nrows - 1;
  int lo[2], hi[2];
  float c0[2];
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int r = min(2 * tq + e, last), q = pr.query(r);
    lo[e] = first_key(p, q, pr.count, skc);
    hi[e] = visible_keys(p, q, pr.count, skc);
    float sf;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(sf) : "r"(base + PagedSmem<D>::ROW_SCALES + 4 * (64 * cw + r)) : "memory");
    c0[e] = fabsf((float)(tp.f.scale * (double)sf * 1.4426950408889634));
  }
  // The thread's keys, in K's row order: rows rho and rho + 8 of the half.
  const int rho = 16 * warp + g;
  const int kr0 = (rho & ~31) | key_of_row(rho & 31), kr1 = ((rho + 8) & ~31) | key_of_row((rho + 8) & 31);
  // Pᵀ's bytes of those keys: row j at 32·j of the k32 step's 256 bytes,
  // key k at its slot, in the 32-byte swizzle.
  const uint32_t pb0 = pt + 256 * (kr0 / 32), pb1 = pt + 256 * (kr1 / 32);
  const int sl0 = kr0 % 32, sl1 = kr1 % 32;

  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f}, lsum[2] = {0.f, 0.f};
  float o[MH][4] = {};     // Oᵀ: D rows 64·h + 16·warp + g (+ 8), rows 2·tq (+ 1)
  float ot[MH][4] = {}, lt[4] = {};  // one tile's P·V and P·ones
  float kmax = 0.f, vunit = 0.f;
  float2 ao = {1.f, 1.f}, apv = {1.f, 1.f};  // the fold factors of the tile in flight: O's, the sums'
  const uint32_t ones[4] = {0x38383838u, 0x38383838u, 0x38383838u, 0x38383838u};  // E4M3 1.0

  auto fold = [&]() {
#pragma unroll
    for (int h = 0; h < MH; h++)
#pragma unroll
      for (int i = 0; i < 4; i++) o[h][i] = fmaf(o[h][i], (i & 1) ? ao.y : ao.x, ot[h][i]);
    lsum[0] = fmaf(lsum[0], apv.x, lt[0]);
    lsum[1] = fmaf(lsum[1], apv.y, lt[1]);
  };
  auto release = [&](int t) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[t % RING]);
  };

  for (int t = 0; t < ntiles; t++) {
    const int st = t % RING;
    // Sᵀ = K·Qᵀ on the half's 64 keys.
    mbar_wait(&k_full[st], (t / RING) & 1);
    const uint32_t k_addr = smem_u32(s_k + st * G::KT) + cw * HN * WK;
    float s[4];
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < D / 32; kk++) {
      const int panel = 32 * kk / WK, off = 32 * kk % WK;
      WGMMA<8>::ss(s, desc<WK>(k_addr + panel * BN * WK + off), desc<WK>(q_addr + panel * 64 * WK + off), kk);
    }
    wg_commit();
    wg_wait<0>();  // (and the previous tile's P·V)
    fence_regs(s);
    if (t > 0) {
      fence_regs(lt);
#pragma unroll
      for (int h = 0; h < MH; h++) fence_regs(ot[h]);
      fold();
      release(t - 1);
    }
    float2 sc;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(sc.x), "=f"(sc.y) : "r"(scales + 8 * st) : "memory");
    kmax = fmaxf(kmax, sc.x);
    const float c[2] = {fmaxf(c0[0] * sc.x, 1.17549435e-38f), fmaxf(c0[1] * sc.x, 1.17549435e-38f)};
    // The mask: keys outside a row's, and past the sequence's.
    const int key0 = (t0 + t) * BN + cw * HN;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int key = key0 + ((i & 2) ? kr1 : kr0), e = i & 1;
      if (key >= hi[e] || key < lo[e]) s[i] = NEG_INF;
    }
    // The rows' maxima over the warpgroup's keys.
    float mx[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
    for (int e = 0; e < 2; e++)
#pragma unroll
      for (int x = 4; x < 32; x <<= 1) mx[e] = fmaxf(mx[e], __shfl_xor_sync(0xffffffffu, mx[e], x));
    const uint32_t mb = maxes + 128 * (t & 1);
    if (g == 0)
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(mb + 32 * warp + 8 * tq), "f"(mx[0]), "f"(mx[1]) : "memory");
    bar();
#pragma unroll
    for (int w = 0; w < 4; w++) {
      float2 v;
      asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(mb + 32 * w + 8 * tq) : "memory");
      mx[0] = fmaxf(mx[0], v.x);
      mx[1] = fmaxf(mx[1], v.y);
    }
    const OnlineStep s0 = online_step(m[0], mx[0] * c[0]), s1 = online_step(m[1], mx[1] * c[1]);
    const float off[2] = {8.f - s0.m_use, 8.f - s1.m_use};
#pragma unroll
    for (int i = 0; i < 4; i++) s[i] = ex2(fmaf(s[i], c[i & 1], off[i & 1]));
    l[0] = fmaf(l[0], s0.alpha, s[0] + s[2]);
    l[1] = fmaf(l[1], s1.alpha, s[1] + s[3]);
    // Pᵀ: rows 2·tq and 2·tq + 1 of keys kr0 and kr1.
    const uint32_t w0 = e4m3_pair(s[0], s[1]), w1 = e4m3_pair(s[2], s[3]);
    const int j = 2 * tq;
    st_shared8(pb0 + swizzle<32>(32 * j + sl0), w0 & 0xff);
    st_shared8(pb0 + swizzle<32>(32 * (j + 1) + sl0), w0 >> 8);
    st_shared8(pb1 + swizzle<32>(32 * j + sl1), w1 & 0xff);
    st_shared8(pb1 + swizzle<32>(32 * (j + 1) + sl1), w1 >> 8);
    fence_async_shared();
    bar();
    // The fold factors of this tile's P·V: alpha, and O's unit (the latest
    // tile's V scale; a tile of scale 0, zeros only, keeps it).
    const float r = sc.y > 0.f && vunit > 0.f ? vunit / sc.y : 1.f;
    if (sc.y > 0.f) vunit = sc.y;
    apv = make_float2(s0.alpha, s1.alpha);
    ao = make_float2(s0.alpha * r, s1.alpha * r);
    // Oᵀ += Vᵀ·Pᵀ over the half's two k32 steps; P·ones beside it.
    mbar_wait(&v_full[st], (t / RING) & 1);
    const uint32_t v_addr = smem_u32(s_v + st * G::VT) + 32 * D * (cw * HN / 32);
    fence_regs(lt);
#pragma unroll
    for (int h = 0; h < MH; h++) fence_regs(ot[h]);
    wg_fence();
#pragma unroll
    for (int k = 0; k < HN / 32; k++) {
#pragma unroll
      for (int h = 0; h < MH; h++) WGMMA<8>::ss(ot[h], desc<32>(v_addr + 32 * D * k + 64 * 32 * h), desc<32>(pt + 256 * k), k > 0);
      WGMMA<8>::rs(lt, ones, desc<32>(pt + 256 * k), k > 0);
    }
    wg_commit();
  }
  wg_wait<0>();
  if (ntiles > 0) {
    fence_regs(lt);
#pragma unroll
    for (int h = 0; h < MH; h++) fence_regs(ot[h]);
    fold();
    release(ntiles - 1);
  }
  // The float32 sums over the warpgroup: its quads' lanes, then its warps.
#pragma unroll
  for (int e = 0; e < 2; e++)
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) l[e] += __shfl_xor_sync(0xffffffffu, l[e], x);
  {
    const uint32_t mb = maxes + 128 * (ntiles & 1);
    if (g == 0) asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(mb + 32 * warp + 8 * tq), "f"(l[0]), "f"(l[1]) : "memory");
    bar();
    float2 v[4];
#pragma unroll
    for (int w = 0; w < 4; w++)
      asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v[w].x), "=f"(v[w].y) : "r"(mb + 32 * w + 8 * tq) : "memory");
    l[0] = (v[0].x + v[1].x) + (v[2].x + v[3].x);
    l[1] = (v[0].y + v[1].y) + (v[2].y + v[3].y);
  }
  const int bh = pr.b * (int)p.hq + pr.head(tid / 2);
  if (ntiles > 0) flag_rows<D>(tp, bh, cw, tid, kmax, base);

  // The halves' merge, into warpgroup 0, through the ring (every tile's
  // copies landed and were read once both loops are done): each row's
  // larger maximum and each side's factor 2^(m - max). (O's units agree:
  // both halves read every tile.)
  constexpr int F = 4 * MH;  // o's values, then m, l and lsum (two each)
  float* x = reinterpret_cast<float*>(s_k);
  auto at = [&](int field) -> float& { return x[field * 128 + tid]; };
  asm volatile("bar.sync 9, 256;\n" ::: "memory");
  if (cw == 1) {
#pragma unroll
    for (int h = 0; h < MH; h++)
#pragma unroll
      for (int i = 0; i < 4; i++) at(4 * h + i) = o[h][i];
#pragma unroll
    for (int e = 0; e < 2; e++) {
      at(F + e) = m[e];
      at(F + 2 + e) = l[e];
      at(F + 4 + e) = lsum[e];
    }
    asm volatile("bar.arrive 10, 256;\n" ::: "memory");
    return;
  }
  asm volatile("bar.sync 10, 256;\n" ::: "memory");
  float f0[2], f1[2];
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const float m1 = at(F + e), mx = fmaxf(m[e], m1), mu = mx == NEG_INF ? 0.f : mx;
    const float a0 = exp2f(m[e] - mu), a1 = exp2f(m1 - mu);
    m[e] = mx;
    l[e] = fmaf(l[e], a0, at(F + 2 + e) * a1);
    lsum[e] = fmaf(lsum[e], a0, at(F + 4 + e) * a1);
    f0[e] = a0;
    f1[e] = a1;
  }
#pragma unroll
  for (int h = 0; h < MH; h++)
#pragma unroll
    for (int i = 0; i < 4; i++) o[h][i] = fmaf(o[h][i], f0[i & 1], at(4 * h + i) * f1[i & 1]);

  // The epilogue: rows 2·tq + e below nrows, each at its own query head and
  // packed row (the LSE [Hq][sq], sq the packed rows), with its head's
  // sink; zeros for a row that saw no key (epilogue_row's rules).
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int j = 2 * tq + e;
    if (j >= pr.nrows) continue;
    const int hd = pr.head(j);
    const long long row = pr.start + pr.query(j);
    const float sink = p.sinks ? p.sinks[hd] * LOG2E : NEG_INF;
    const bool keys = row_has_keys(l[e]);
    const float f = vunit / (lsum[e] + ex2(sink - m[e] + 8.f));
    float* orow = p.out + hd * p.o_head_stride + row * p.o_row_stride;
#pragma unroll
    for (int h = 0; h < MH; h++)
#pragma unroll
      for (int i = e; i < 4; i += 2) {
        const int col = 64 * h + 16 * warp + g + 8 * (i >> 1);
        if (col < p.d) orow[col] = keys ? o[h][i] * f : 0.f;
      }
    if (p.lse && warp == 0 && g == 0) p.lse[hd * p.sq + row] = row_lse(m[e] - 8.f, l[e]);
  }
}
