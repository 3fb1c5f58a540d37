// hopper/tensors.cuh: the producer of stage9's tensor form, which reads the
// caller's FP8 tensors where they are: Q, K and V in any layout whose rows
// are D contiguous bytes (BHSD, BSHD, with their strides), through tensor
// maps the host encodes per call. Included by hopper.cuh only, inside
// namespace hopper, after shell.cuh.
//
// Q and K arrive as the images would hold them: a tensor map's box of WK
// bytes by R rows, in the 64- or 128-byte swizzle mode, is one panel of
// one image block, so the copy engine swizzles and zero-fills (rows past
// the sequence, columns past D) what the pack kernels did. V is K-major
// in the caller's tensor but P·V wants it transposed (wgmma's e4m3 B
// operand is K-major only). The one-tile form transposes it in the
// kernel: its two tiles land in staging buffers laid out as K tiles, and
// the producer warpgroup's four warps transpose them into the ring
// (ldmatrix .trans, prmt, stmatrix), keys in sigma order (common.cuh). The
// tiled form reads the V image pack_v_tensor writes once per call with the
// same transpose (produce_tensors says why). The consumers see the same shared memory as in the image
// forms.

// TensorMap is the driver's CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

// TensorParams is the tensor form's parameter block, mirrored by
// backend/cuda (tensorParams; the module exports its layout as
// fp8attn_tensor_params_layout). q, k and v map the caller's tensors as
// (D, S, H, B) bytes, boxes of (WK, 64) for q and (WK, BN) for k and v. f
// carries the shapes, the scales, the outputs and the score factor's
// check, as for the fused form (its Params' q, k, v and images unused).
//
// A key-split launch (fp8attn_stage9ts, then fp8attn_merge9) divides each
// block's key tiles into splits parts, grid z b·splits + part: each part
// writes its rows to part_o, [splits][B][Hq][Sq][d] floats (normalized by
// the part's rounded weights and descaled, without the sink), and two
// log2-domain sums a row to part_w, [2][splits][B][Hq][Sq]: of the rounded
// weights (what merges the rows) and of the float32 ones (the LSE). Other
// launches leave splits 0.
//
// The paged form (fp8attn_stage9tp_d<D>, hopper/paged.cuh) reads K and V
// from the paged cache instead of the caller's tensors and an image: K
// through k, then the map of the whole K pool (hopper/paged.cuh says how),
// V from the pool v_pages (a block of PAGE·D codes a (page, KV head),
// pages page_kv_heads heads deep), their scales k_page_scale and
// v_page_scale (one a block), and each batch entry's pages_per_seq pages
// in block_table; and its queries from q_rows, the caller's float32
// queries at f.p's query strides (its consumers encode them: q is not
// read). The packed form (fp8attn_stage9tv_d<D>, hopper/packed.cuh) reads
// its blocks' items from items (b, kvh, r0, nrows each) and the
// sequences' first packed rows from q_starts (B + 1 of them). Other
// launches leave them 0.
struct TensorParams {
  TensorMap q, k, v;
  FusedQuantParams f;
  float* part_o;
  float* part_w;
  long long splits;
  const uint8_t* v_pages;
  const float* k_page_scale;
  const float* v_page_scale;
  const int* block_table;
  long long pages_per_seq, page_kv_heads;
  const float* q_rows;
  const int4* items;
  const int* q_starts;
};

// producer_bar_sync is a barrier of the producer warpgroup alone (named
// barrier 6, as the quantizing form's producer_sync; the consumers' turns
// take 1 to 4).
__device__ __forceinline__ void producer_bar_sync() { asm volatile("bar.sync 6, 128;\n" ::: "memory"); }

// The producer works on 32-bit shared-memory addresses (the block's
// regions are constant offsets from one base), so that its loop fits the
// 24 registers setmaxnreg leaves it: bulk.cuh's _at primitives, and
// 16-byte loads and stores here.
__device__ __forceinline__ uint4 ld_shared128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared128(uint32_t a, uint4 v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// byte_perm is prmt: bytes of (hi:lo) picked by the selector's nibbles.
__device__ __forceinline__ uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
  return r;
}

// TensorSmem is the tensor form's shared memory, as offsets from the
// block's 1024-aligned base (stage9's layout): Q, the K and V rings, the
// block of ones, V's two staging buffers (none in the narrow form, whose Q
// is NARROW_BM rows), then the barriers (q_full,
// k_full[RING], v_full[RING], empty[RING], then q_raw and staged[2]).
template <int D, bool NARROW = false, int R = HopperTiles<D>::RING> struct TensorSmem {
  using G = Geometry<D, R>;
  static constexpr uint32_t K = (NARROW ? HopperTiles<D>::NARROW_BM : G::BM) * G::DK, V = K + G::RING * G::KT, ONES = V + G::RING * G::VT,
                            STAGE = ONES + G::ONES, BARS = STAGE + (NARROW ? 0 : 2 * G::KT);
  static constexpr uint32_t Q_FULL = BARS, K_FULL = BARS + 8, V_FULL = K_FULL + 8 * G::RING, EMPTY = V_FULL + 8 * G::RING,
                            Q_RAW = EMPTY + 8 * G::RING, STAGED = Q_RAW + 8;
};

// staged_offset is where byte (key, col) of a staging buffer of K tiles
// is: tile-major, each tile DK/WK panels of BN rows of WK bytes, swizzled
// as the tensor map's mode lays them out (the K image's layout).
template <int D> __device__ __forceinline__ uint32_t staged_offset(int key, int col) {
  using G = Geometry<D>;
  return key / G::BN * G::KT + col / G::WK * G::BN * G::WK + swizzle<G::WK>(key % G::BN * G::WK + col % G::WK);
}

// ldsm_t4 is ldmatrix .x4 .trans: four 8x8 matrices of 16-bit elements,
// lanes 8i .. 8i+7 giving the addresses of matrix i's eight 16-byte rows;
// lane l receives, of each matrix, rows 2(l%4) and 2(l%4)+1 of element
// column l/4 (four bytes: row 2(l%4) bytes 2(l/4), +1, then row 2(l%4)+1's).
__device__ __forceinline__ uint4 ldsm_t4(uint32_t a) {
  uint4 v;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(a)
               : "memory");
  return v;
}
// stsm4 is stmatrix .x4: lane l gives, of each matrix, bytes 4(l%4) ..
// 4(l%4)+3 of row l/4; lanes 8i .. 8i+7 the addresses of matrix i's rows.
__device__ __forceinline__ void stsm4(uint32_t a, uint4 v) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

// transpose_v writes the V images of TILES tiles (D rows of BN bytes each,
// keys in sigma order, swizzled with BN-byte rows: pack_v's layout) at dst
// from the staging buffer at src, a warp at a time. A unit of work is one
// 16-key group by 32 columns: ldmatrix .trans gives lane (c, q) = (l/4,
// l%4), of keys 2q, 2q+1 (matrix 0) and 2q+8, 2q+9 (matrix 1), columns 2c
// and 2c+1; one prmt per column puts those four keys in sigma's order,
// sigma(4q + i) = 2q + (i & 1) + 8(i >> 1), which is where stmatrix stores
// lane (c, q)'s word: bytes 4q .. 4q+3 of a row. Matrices 2 and 3 are
// columns 16-31. Stored matrix 0 holds rows 2c (c < 4) and 2c+1 (c >= 4),
// matrix 1 the others, so that each store's eight rows fall in eight
// different 16-byte bank groups in both swizzles; the loads' eight keys
// do in theirs.
template <int D, int TILES> __device__ __forceinline__ void transpose_v(uint32_t src, uint32_t dst, int tid) {
  using G = Geometry<D>;
  constexpr int BN = G::BN, DB = D / 32, UNITS = TILES * BN / 16 * DB;
  static_assert(D % 32 == 0 && BN % 16 == 0 && UNITS % 4 == 0, "whole units for every producer warp");
  const int lane = tid % 32, warp = tid / 32, mi = lane / 8, r = lane % 8;
  const bool swap = (lane >> 4) & 1;  // c >= 4: matrix 0 takes the odd column
  const uint32_t sel0 = swap ? 0x7531 : 0x6420, sel1 = swap ? 0x6420 : 0x7531;
#pragma unroll 1
  for (int u = warp; u < UNITS; u += 4) {
    const int g = u / DB, d0 = 32 * (u % DB);
    const uint4 w = ldsm_t4(src + staged_offset<D>(16 * g + r + 8 * (mi & 1), d0 + 16 * (mi >> 1)));
    uint4 o;
    o.x = byte_perm(w.x, w.y, sel0);
    o.y = byte_perm(w.x, w.y, sel1);
    o.z = byte_perm(w.z, w.w, sel0);
    o.w = byte_perm(w.z, w.w, sel1);
    const int d = d0 + 16 * (mi >> 1) + 2 * r + ((mi & 1) ^ (r >> 2));
    stsm4(dst + g / (BN / 16) * G::VT + swizzle<BN>(d * BN + 16 * (g % (BN / 16))), o);
  }
}

// tensor_rows copies rows row0 .. row0 + rows - 1 of head (head, b) of the
// tensor map m into dst as image blocks of BOX rows (each DK/WK panels of
// BOX x WK, the map's box), completing on bar.
template <int D, int BOX>
__device__ __forceinline__ void tensor_rows(const TensorMap* m, uint32_t dst, int row0, int rows, int head, int b, uint32_t bar) {
  using G = Geometry<D>;
  for (int r = 0; r < rows; r += BOX) {
#pragma unroll
    for (int panel = 0; panel < G::DK / G::WK; panel++)
      tensor_load_4d_at(dst + r * G::DK + panel * BOX * G::WK, m, panel * G::WK, row0 + r, head, b, bar);
  }
}

// produce_tensors is the tensor form's producer warpgroup, base the
// block's shared memory (TensorSmem); thread 0 issues the copies. First
// Q's block of ROWS rows: onto q_full, or, where neg (a negative score
// factor), onto q_raw, then its codes negated in place by the warpgroup
// (exact: the sign bit; the consumers then work with a positive factor,
// as in the image forms) and q_full arrived at. Then, in the tiled form,
// per tile t (key tile t0 + t) in ring slot t % RING once the consumers released it: K onto
// k_full, and V's tile of the V image (pack_v_tensor's, written once per
// call just before) onto v_full, as the image form copies it. HEAD (the
// head start, for grids of one wave: fp8attn_stage9th): V's first two
// tiles transposed here instead, from the caller's V into slots 0 and 1,
// beside Q's and the first tiles' K copies, all before the warpgroup's
// pdl_wait (pdl.cuh says why that is safe), and the V image read from the
// third tile on, after it; so that a block's first tiles overlap the V
// pack's last. The one-tile
// form copies both K tiles at once into slots 0 and 1 on slot 0's
// barriers, and V's two tiles into the staging buffers, which the
// warpgroup's 128 threads transpose into the two slots.
//
// Transposing every V tile in every block (the one-tile form's way, for
// every form) measured 14-21% slower on the tiled shapes than the image
// form on the H200 (D 64, 128, 256 at 4096 keys): the transposes
// contend with the consumers, not delay them (arriving at v_full before
// transposing changed nothing), and a block transposes each tile that
// the pack transposes once for all the blocks of its KV head
// (docs/design/hopper-prefill.md).
template <int D, bool ONE, bool HEAD = false, bool NARROW = false>
__device__ __forceinline__ void produce_tensors(const TensorParams& tp, int b, int h, int kvh, int i0, int t0, int ntiles, bool neg,
                                                uint32_t base) {
  using G = Geometry<D>;
  using S = TensorSmem<D, NARROW>;
  constexpr int DK = G::DK, BN = G::BN, RING = G::RING, ROWS = ONE ? G::ONE_BM : NARROW ? HopperTiles<D>::NARROW_BM : G::BM;
  static_assert(!HEAD || (!ONE && RING >= 2), "the head start: the tiled form, its two tiles in ring slots 0 and 1");
  const int tid = threadIdx.x;
  if (ntiles <= 0) {  // (no copy may be in flight when the block exits)
    if constexpr (HEAD) pdl_wait();  // (before returning)
    return;
  }
  if (tid == 0) {
    const uint32_t qbar = base + (neg ? S::Q_RAW : S::Q_FULL);
    mbar_expect_tx_at(qbar, ROWS * DK);
    tensor_rows<D, 64>(&tp.q, base, i0, ROWS, h, b, qbar);
    if constexpr (ONE) {
      mbar_expect_tx_at(base + S::STAGED, 2 * G::KT);
      tensor_rows<D, BN>(&tp.v, base + S::STAGE, 0, 2 * BN, kvh, b, base + S::STAGED);
      mbar_expect_tx_at(base + S::K_FULL, 2 * G::KT);
      tensor_rows<D, BN>(&tp.k, base + S::K, 0, 2 * BN, kvh, b, base + S::K_FULL);
    } else if constexpr (HEAD) {
      mbar_expect_tx_at(base + S::STAGED, 2 * G::KT);
      tensor_rows<D, BN>(&tp.v, base + S::STAGE, t0 * BN, 2 * BN, kvh, b, base + S::STAGED);
      for (int t = 0; t < ntiles && t < RING; t++) {
        mbar_expect_tx_at(base + S::K_FULL + 8 * t, G::KT);
        tensor_rows<D, BN>(&tp.k, base + S::K + t * G::KT, (t0 + t) * BN, BN, kvh, b, base + S::K_FULL + 8 * t);
      }
    }
  }
  if (neg) {
    mbar_wait_at(base + S::Q_RAW, 0);
    for (int o = 16 * tid; o < ROWS * DK; o += 16 * 128) st_shared128(base + o, negate_if(ld_shared128(base + o), true));
    fence_async_shared();
    producer_bar_sync();
    if (tid == 0) mbar_arrive_at(base + S::Q_FULL);
  }
  if constexpr (ONE) {
    mbar_wait_at(base + S::STAGED, 0);
    transpose_v<D, 2>(base + S::STAGE, base + S::V, tid);
    fence_async_shared();
    producer_bar_sync();
    if (tid == 0) mbar_arrive_at(base + S::V_FULL);
  } else {
    if constexpr (HEAD) {
      mbar_wait_at(base + S::STAGED, 0);
      transpose_v<D, 2>(base + S::STAGE, base + S::V, tid);
      fence_async_shared();
      producer_bar_sync();
      if (tid == 0) {
        mbar_arrive_at(base + S::V_FULL);
        mbar_arrive_at(base + S::V_FULL + 8);
      }
      pdl_wait();  // before the V image's first copy, and before returning
    }
    if (tid == 0) {
      const long long sk_p = (tp.f.p.sk + BN - 1) / BN * BN;
      const uint8_t* vimg = tp.f.p.vi + ((long long)b * tp.f.p.hkv + kvh) * sk_p * D + (long long)t0 * G::VT;
      for (int t = 0; t < ntiles; t++) {
        const int s = t % RING;
        if (t >= RING) mbar_wait_at(base + S::EMPTY + 8 * s, (t / RING - 1) & 1);
        if (!HEAD || t >= RING) {  // (HEAD: the first tiles' K are in flight)
          mbar_expect_tx_at(base + S::K_FULL + 8 * s, G::KT);
          tensor_rows<D, BN>(&tp.k, base + S::K + s * G::KT, (t0 + t) * BN, BN, kvh, b, base + S::K_FULL + 8 * s);
        }
        if (HEAD && t < 2) continue;  // (transposed above)
        mbar_expect_tx_at(base + S::V_FULL + 8 * s, G::VT);
        bulk_load_at(base + S::V + s * G::VT, vimg + (long long)t * G::VT, G::VT, base + S::V_FULL + 8 * s);
      }
    }
  }
}

// pack_v_tensor writes one tile of the V image (pack_v's layout) from the
// caller's V through tp's map: block (tile, b·Hkv + kvh) of 128 threads
// copies the tile's BN keys into shared memory as a K tile (zeros past the
// keys), transposes it with transpose_v, and stores the image tile with
// 16-byte stores. So V is read once, coalesced, where pack_v gathers its
// bytes one at a time. LATE (fp8attn_pack9vth, before the head start's
// entry) launches its dependents only past its pdl_wait; the other's
// entry point launches them at once. Dynamic shared memory:
// PackVSmem<D>::BYTES.
template <int D> struct PackVSmem {
  using G = Geometry<D>;
  static constexpr int IMAGE = G::KT, BAR = IMAGE + G::VT, BYTES = BAR + 8 + 1023;
};
template <int D, bool LATE = false> __device__ __forceinline__ void pack_v_tensor(const TensorParams& tp) {
  using G = Geometry<D>;
  using S = PackVSmem<D>;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t base = smem_u32(smem);
  const int tid = threadIdx.x, tile = blockIdx.x, head = blockIdx.y;
  const int hkv = (int)tp.f.p.hkv, b = head / hkv, kvh = head % hkv;
  const int tiles = (int)((tp.f.p.sk + G::BN - 1) / G::BN);
  if (tid == 0) {
    mbar_init(reinterpret_cast<uint64_t*>(smem + S::BAR), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  pdl_wait();  // before the first global access (pdl.cuh)
  if constexpr (LATE) pdl_launch_dependents();  // (the head start's pack: pdl.cuh)
  if (tid == 0) {
    mbar_expect_tx_at(base + S::BAR, G::KT);
    tensor_rows<D, G::BN>(&tp.v, base, tile * G::BN, G::BN, kvh, b, base + S::BAR);
  }
  mbar_wait_at(base + S::BAR, 0);
  transpose_v<D, 1>(base, base + S::IMAGE, tid);
  __syncthreads();
  uint8_t* dst = tp.f.p.vi + ((long long)head * tiles + tile) * G::VT;
  for (int o = 16 * tid; o < G::VT; o += 16 * 128) *reinterpret_cast<uint4*>(dst + o) = ld_shared128(base + S::IMAGE + o);
}
