// hopper/paged.cuh: the producer of stage9's paged form
// (fp8attn_stage9tp_d<D>), which reads K and V from the paged FP8 cache
// where they are (backend/cuda's pagedKV: paged/append.cuh lays the pages
// out) instead of from gathered tensors and a V image. Included by
// hopper.cuh only, inside namespace hopper, after tensors.cuh.
//
// A page's V block (per 32 slots, D rows of 32 bytes, the 16-byte halves
// swapped where bit 2 of the row is set) is wgmma's K-major operand in the
// 32-byte swizzle as it is: a tile's V is its pages' blocks one after the
// other, one bulk copy each, and P·V reads them with descriptors of 32-byte
// rows (the consumers' issue_pv). A page's K block keeps key j at row j with
// its chunks XORed by k_swizzle(j), which is key_row(j) mod 8: moved whole to
// row key_row(j) of its 32 keys, each row is where wgmma's 128-byte swizzle
// wants it. key_row permutes the slot's bits (row bits r0..r4 are slot bits
// j0, j2, j3, j1, j4), so tp.k maps the whole K pool as five dimensions
// (the row's D bytes; j0, 2 at D bytes apart; j2 and j3, 4 at 4·D; j1, 2 at
// 2·D; the 16-key groups of every (page, KV head) block, at 16·D), and one
// box of (D, 2, 4, 2, 4) lands a page's 64 rows in key_row's order
// (backend/cuda's encodePages): one tensor copy a page, no swizzle mode.
// The scores come out with column c holding key key_of_row(c) (the
// consumers' mask reads it so), which puts P in the A registers in key
// order, the order of V's slots (testdata/wmma/wgmmapaged.cu holds both to
// the hardware).
//
// Scales: one power of two a (page, KV head) for K and for V. A tile's
// scales are the largest of its pages'; where its pages' differ, the
// smaller page's codes are re-encoded at the tile's scale in shared memory
// (rescale16, the gather's own re-encoding) after they land, before the
// tile's barrier is arrived at. The tile's scales go to shared memory
// beside its barriers: the consumers take K's into the tile's score factor
// and V's into the fold (Consumer's PAGED steps). The producer warpgroup
// reads the block table and the scales CHUNK tiles at a time, a tile a
// thread, ahead of the copies.
//
// Queries: each consumer warpgroup encodes its own 64 rows from the
// caller's float32 queries, a row at a time (quantize_rows): a row's scale
// is its own amax's, so no block waits for a head's amax, and each row's
// score factor is its own (two a thread, its rows r0 and r0 + 8).

// PAGE is the tokens of a page the paged form reads (the host checks the
// cache's KVCacheConfig.PageSize).
constexpr int PAGE = 64;

// PagedSmem is the paged form's own shared memory inside the tensor form's
// V staging buffers, which it does not use (TensorSmem): the barriers the
// copies of a tile whose pages' scales differ land on first (K's RING,
// then V's RING), each ring slot's tile scales (float2: K, V), then the
// chunk of CHUNK tiles the producer reads ahead: each tile's two (page, KV
// head) blocks (int2) and its pages' scales (float4: K's two, V's two);
// then the block's query rows' scales (quantize_rows), a float each.
constexpr int CHUNK = 128;
template <int D> struct PagedSmem {
  static constexpr int RING = HopperTiles<D>::PAGED_RING;  // (the paged forms' ring)
  using S = TensorSmem<D, false, RING>;
  static constexpr uint32_t LANDED = S::STAGE, SCALES = LANDED + 16 * RING, BLOCKS = SCALES + 8 * RING,
                            PAGE_SCALES = (BLOCKS + 8 * CHUNK + 15) / 16 * 16, ROW_SCALES = PAGE_SCALES + 16 * CHUNK;
  static_assert(PAGE_SCALES % 16 == 0 && ROW_SCALES + 4 * Geometry<D>::BM <= S::BARS, "inside the staging buffers");
};

// quantize_rows encodes consumer warpgroup cw's Q block of the paged form
// (at q, Q's swizzled block of 64 rows: qk_image_offset) from the caller's
// float32 queries: row r of the block from src, this thread's row's D
// values (r = tid / 2; null: a row past the queries, zeros), each row at
// its own scale, fp8.ScaleForAmax of the row's amax (NaN and ±Inf
// ignored), each value fp8.ToE4M3(x/scale, NoSat) as Memory.Quantize
// encodes a head's. The codes are negated where the call's scale is
// negative, so that every score factor is positive. Threads 2r and 2r + 1
// of the warpgroup (tid) take row r, 8 of each 16 values (its 16-byte
// chunk's halves), and share its amax; the row's scale goes to the block's
// ROW_SCALES (row 64·cw + r; 0 for a row of zeros, whose factor is then 0:
// its scores are 0 at any factor). Returns the score factors, without K's scale,
// of this thread's rows of the wgmma layout (r0 = 16·warp + g and r0 + 8,
// whose encoders are lanes 2g and 2g + 16 of the same warp): the call's
// scale times the row's scale times log2(e), in float64 rounded once, as
// score_factor's product. The warpgroup's codes are visible to its wgmma
// on return (a fence and its named barrier, 7 + cw).
template <int D>
__device__ __forceinline__ float2 quantize_rows(const TensorParams& tp, const float* src, int cw, int tid, uint32_t q, uint32_t base) {
  using G = Geometry<D>;
  static_assert(G::DK == D && D % 16 == 0, "rows of whole 16-byte chunks, unpadded");
  const int r = tid / 2, half = tid % 2, g = (tid % 32) / 4;
  const bool in = src != nullptr;
  if (in) src += 8 * half;
  constexpr int STEPS = D / 16;  // the row's 16-byte chunks: this thread's 8 values of each
  float4 x[STEPS][2];
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < STEPS; j++) {
#pragma unroll
    for (int e = 0; e < 2; e++) {
      x[j][e] = in ? __ldg(reinterpret_cast<const float4*>(src + 16 * j + 4 * e)) : make_float4(0.f, 0.f, 0.f, 0.f);
      m = amax_add(amax_add(amax_add(amax_add(m, x[j][e].x), x[j][e].y), x[j][e].z), x[j][e].w);
    }
  }
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  const float s = scale_for_amax(m);
  // (A row of zeros, past sq or not, has scores 0 whatever its factor: 0,
  // which no limit flags and no K scale turns into an infinity.)
  const float sf = m > 0.f ? s : 0.f;
  const uint32_t neg = tp.f.scale < 0.0 ? 0x80808080u : 0u;
#pragma unroll
  for (int j = 0; j < STEPS; j++) {
    const uint32_t lo = encode4(x[j][0], s) ^ neg, hi = encode4(x[j][1], s) ^ neg;
    const uint32_t at = q + (uint32_t)qk_image_offset<D, 64>(r, 16 * j + 8 * half);
    asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(at), "r"(lo), "r"(hi) : "memory");
  }
  if (half == 0) asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(base + PagedSmem<D>::ROW_SCALES + 4 * (64 * cw + r)), "f"(sf) : "memory");
  fence_async_shared();
  asm volatile("bar.sync %0, 128;\n" ::"r"(7 + cw) : "memory");
  const float c = fabsf((float)(tp.f.scale * (double)sf * 1.4426950408889634));
  return make_float2(__shfl_sync(0xffffffffu, c, 2 * g), __shfl_sync(0xffffffffu, c, 2 * g + 16));
}

// flag_rows flags query head bh (b·Hq + h) in tp.f.bad (as score_factor
// does), bh this thread's row's (tid / 2), where a row of consumer warpgroup cw's score factor
// with the largest K scale of the block's tiles (kmax) passes tp.f.limit:
// the call's scale times the row's scale (quantize_rows') times kmax, in
// float64. Thread tid checks row tid / 2 (the even ones). This is the
// bound the block's scores need: a row's factor with the tiles it reads,
// where the gathered path checks a head's factor with its sequence's
// largest K scale, so a row whose tiles all have smaller scales than the
// sequence's largest may pass here and not there.
template <int D>
__device__ __forceinline__ void flag_rows(const TensorParams& tp, int bh, int cw, int tid, float kmax, uint32_t base) {
  if (tid % 2 != 0) return;
  float s;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(s) : "r"(base + PagedSmem<D>::ROW_SCALES + 4 * (64 * cw + tid / 2)) : "memory");
  if (fabs(tp.f.scale * (double)s * (double)kmax) > tp.f.limit) atomicCAS(tp.f.bad, 0, 1 + bh);
}

// produce_paged is the paged form's producer warpgroup, base the block's
// shared memory (TensorSmem): per tile t (key tile t0 + t, ring slot t %
// RING, once the consumers released it) its pages' K rows (one tensor
// copy a page through tp.k) and V blocks (one bulk copy a page), from
// thread 0, onto k_full and v_full, or onto the slot's own barriers where
// the tile's pages' K (or V) scales differ, then the smaller page
// re-encoded by the warpgroup and the tile's barrier arrived at. Every
// CHUNK tiles the warpgroup first reads the next CHUNK tiles' blocks and
// scales, a tile a thread. A page past the sequence's last (skb keys) is
// read as its last page: its keys are past every row's, weighed exactly 0,
// and its codes finite. (The queries are the consumers': quantize_rows.)
template <int D>
__device__ __forceinline__ void produce_paged(const TensorParams& tp, int b, int kvh, int t0, int ntiles, long long skb, uint32_t base) {
  using P = PagedSmem<D>;
  using G = Geometry<D, P::RING>;
  using S = typename P::S;
  constexpr int BN = G::BN, RING = G::RING, PER = BN / PAGE;
  static_assert(BN % PAGE == 0 && PER == 2 && G::DK == D && D == G::WK && BN <= 128,
                "two whole pages a tile, one K panel of unpadded rows");
  const int tid = threadIdx.x;
  if (ntiles <= 0) return;
  if (tid == 0) {
    for (int i = 0; i < 2 * RING; i++) mbar_init_at(base + P::LANDED + 8 * i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  const int* table = tp.block_table + (long long)b * tp.pages_per_seq;
  const int last = (int)((skb + PAGE - 1) / PAGE) - 1;
  const int heads = (int)tp.page_kv_heads;
  unsigned landed = 0;  // bit i: the parity slot barrier LANDED + 8i waits for next
  for (int t = 0; t < ntiles; t++) {
    if (t % CHUNK == 0) {  // the next chunk's blocks and scales, tile t + tid this thread's
      producer_bar_sync();  // (every thread done with the chunk before; the landed barriers initialized)
      if (t + tid < ntiles) {
        const int n = (t0 + t + tid) * PER;
        const int blk0 = table[min(n, last)] * heads + kvh, blk1 = table[min(n + 1, last)] * heads + kvh;
        const float4 sc = make_float4(tp.k_page_scale[blk0], tp.k_page_scale[blk1], tp.v_page_scale[blk0], tp.v_page_scale[blk1]);
        asm volatile("st.shared.v2.s32 [%0], {%1, %2};\n" ::"r"(base + P::BLOCKS + 8 * tid), "r"(blk0), "r"(blk1) : "memory");
        st_shared128(base + P::PAGE_SCALES + 16 * tid, make_uint4(__float_as_uint(sc.x), __float_as_uint(sc.y), __float_as_uint(sc.z),
                                                                 __float_as_uint(sc.w)));
      }
      producer_bar_sync();
    }
    const int s = t % RING, c = t % CHUNK;
    const uint4 sc = ld_shared128(base + P::PAGE_SCALES + 16 * c);
    const float ks0 = __uint_as_float(sc.x), ks1 = __uint_as_float(sc.y), vs0 = __uint_as_float(sc.z), vs1 = __uint_as_float(sc.w);
    const float kmax = fmaxf(ks0, ks1), vmax = fmaxf(vs0, vs1);
    // A page of scale 0 holds zeros only: nothing to re-encode.
    const bool kre = ks0 != ks1 && fminf(ks0, ks1) > 0.f, vre = vs0 != vs1 && fminf(vs0, vs1) > 0.f;
    const uint32_t kdst = base + S::K + s * G::KT, vdst = base + S::V + s * G::VT;
    if (tid == 0) {
      int blk0, blk1;
      asm volatile("ld.shared.v2.s32 {%0, %1}, [%2];\n" : "=r"(blk0), "=r"(blk1) : "r"(base + P::BLOCKS + 8 * c) : "memory");
      const uint32_t kbar = base + (kre ? P::LANDED + 8 * s : S::K_FULL + 8 * s);
      const uint32_t vbar = base + (vre ? P::LANDED + 8 * (RING + s) : S::V_FULL + 8 * s);
      if (t >= RING) mbar_wait_at(base + S::EMPTY + 8 * s, (t / RING - 1) & 1);
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(base + P::SCALES + 8 * s), "f"(kmax), "f"(vmax) : "memory");
      mbar_expect_tx_at(kbar, G::KT);
      tensor_load_5d_at(kdst, &tp.k, 0, 0, 0, 0, 4 * blk0, kbar);
      tensor_load_5d_at(kdst + PAGE * D, &tp.k, 0, 0, 0, 0, 4 * blk1, kbar);
      mbar_expect_tx_at(vbar, G::VT);
      bulk_load_at(vdst, tp.v_pages + (long long)blk0 * PAGE * D, PAGE * D, vbar);
      bulk_load_at(vdst + PAGE * D, tp.v_pages + (long long)blk1 * PAGE * D, PAGE * D, vbar);
    }
    if (kre || vre) {  // (the same for every thread of the warpgroup)
      if (kre) {
        mbar_wait_at(base + P::LANDED + 8 * s, (landed >> s) & 1);
        landed ^= 1u << s;
        const uint32_t at = kdst + (ks0 < ks1 ? 0 : PAGE * D);  // the smaller page's rows (key_row keeps a key's 32)
        const float r = fminf(ks0, ks1) / kmax;
        for (int o = 16 * tid; o < PAGE * D; o += 16 * 128) st_shared128(at + o, rescale16(ld_shared128(at + o), r));
      }
      if (vre) {
        mbar_wait_at(base + P::LANDED + 8 * (RING + s), (landed >> (RING + s)) & 1);
        landed ^= 1u << (RING + s);
        const uint32_t at = vdst + (vs0 < vs1 ? 0 : PAGE * D);
        const float r = fminf(vs0, vs1) / vmax;
        for (int o = 16 * tid; o < PAGE * D; o += 16 * 128) st_shared128(at + o, rescale16(ld_shared128(at + o), r));
      }
      fence_async_shared();
      producer_bar_sync();
      if (tid == 0) {
        if (kre) mbar_arrive_at(base + S::K_FULL + 8 * s);
        if (vre) mbar_arrive_at(base + S::V_FULL + 8 * s);
      }
    }
  }
}
