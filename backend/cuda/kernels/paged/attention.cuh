// paged/attention.cuh: paged_attention, the cp.async split-KV kernel (every
// GPU from sm_80). Included by paged.cu only, in its order.
#pragma once

// The cp.async kernel (every GPU from sm_80): a block per unit (grid
// (splits, hkv·row_blocks, b); a varlen batch's (items, splits, 1)); its warps walk their own tiles, tile
// ta+warp, ta+warp+W, ..., through their own 2-slot rings. CAP: the
// softcap twin (the scores capped before the mask).
template <int D, bool CAP>
__device__ __forceinline__ void paged_attention(const PagedParams p) {
  using T = PagedTiles<D>;
  constexpr int NC = D / 16, KP = T::KPITCH, KEYS = T::KEYS, W = T::WARPS;
  static_assert(KEYS == 32 && T::ROWS == 8, "the fragment walk assumes 32-key tiles and 8 rows");
  constexpr int SO = D + 8;
  static_assert(W * 8 * SO * 4 <= T::SMEM, "the warps' rows fit in the rings");
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float sm_m[W][8], sm_l[W][8], sm_vs[W];

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  auto unit = [&] {
    return p.q_starts ? paged_unit_var(p, blockIdx.x, blockIdx.y)
                      : paged_unit(p, blockIdx.z, blockIdx.y / p.row_blocks, blockIdx.y % p.row_blocks, blockIdx.x);
  };
  const PagedUnit u = unit();
  const int ta = u.ta, tb = u.tb, kh = u.kh;

  uint8_t* ring = smem + warp * T::RING * T::TILE;
  const long long blk_bytes = (long long)D * p.page_size;
  const int* table = p.block_table + (long long)u.b * p.pages_per_seq;
  auto page_of = [&](int tile) { return table[tile * KEYS / p.page_size]; };
  auto issue = [&](int tile, int page, int slot) {
    const int col = tile * KEYS % p.page_size;
    const uint8_t* kb = p.k + ((long long)page * p.hkv + kh) * blk_bytes + (long long)col * D;
    const uint8_t* vb = p.v + ((long long)page * p.hkv + kh) * blk_bytes + (long long)col * D;  // [D][32] at col
    uint8_t* sk = ring + slot * T::TILE;
    uint8_t* sv = sk + KEYS * KP;
    // Trip counts known at compile time (fully unrolled, the offsets folded
    // into constants but for the lane's own): KEYS·NC and 2·D are multiples
    // of 32 for every D that is a multiple of 16. Keys go to their shared
    // rows (key_row) at an odd pitch, unswizzled; values as they are stored.
#pragma unroll
    for (int i = 0; i < KEYS * NC / 32; i++) {
      const int c = lane + 32 * i, key = c / NC, ch = c % NC;
      cp_async16_l1(sk + key_row(key) * KP + 16 * ch, kb + key * D + 16 * (ch ^ k_swizzle(key, NC)));
    }
#pragma unroll
    for (int i = 0; i < 2 * D / 32; i++) {
      const int c = lane + 32 * i;
      cp_async16_l1(sv + c * 16, vb + c * 16);
    }
  };

  // Software pipeline (the first tile's copies go out before the queries
  // load): the copies of tile T+W are issued before tile T is
  // computed, with T+W's page (and scales) loaded one iteration earlier
  // still, so that no dependent global load sits between a tile's wait and
  // its math.
  int slot = 0, page_next = 0;
  float ks = 0.f, vs = 0.f;
  if (ta + warp < tb) {
    const int pg = page_of(ta + warp);
    issue(ta + warp, pg, 0);
    ks = p.k_scale[(long long)pg * p.hkv + kh];
    vs = p.v_scale[(long long)pg * p.hkv + kh];
  }
  cp_async_commit();
  if (ta + warp + W < tb) page_next = page_of(ta + warp + W);
  PagedWarp<D> st;
  st.start(p, u, g, t);

  // The tile loop, with the softcap (CAP: the softcap twin's entry
  // point, so that the plain kernel keeps its registers) or without.
  auto walk = [&]() {
    for (int tile = ta + warp; tile < tb; tile += W) {
      float ks_next = 0.f, vs_next = 0.f;
      int page_after = 0;
      if (tile + W < tb) {
        issue(tile + W, page_next, slot ^ 1);
        ks_next = p.k_scale[(long long)page_next * p.hkv + kh];
        vs_next = p.v_scale[(long long)page_next * p.hkv + kh];
        if (tile + 2 * W < tb) page_after = page_of(tile + 2 * W);
      }
      cp_async_commit();
      cp_async_wait<1>();
      __syncwarp();
      const uint8_t* sk = ring + slot * T::TILE;
      st.template tile<CAP>(sk + lane * KP, 0, sk + KEYS * KP, ks, vs, tile * KEYS, lane, t);
      __syncwarp();  // every lane is done with the slot before it is refilled
      slot ^= 1;
      ks = ks_next;
      vs = vs_next;
      page_next = page_after;
    }
  };
  walk();
  cp_async_wait<0>();
  st.finish();
  // The rings are idle after the first barrier: the warps' rows go there.
  // The merge gets the unit worked out again (from the block's indices,
  // or a varlen unit's place reloaded), not kept across the tile loop: kept,
  // the D=256 build spilled.
  merge_warps<D, SO, W>(p, unit(), st, (float*)smem, sm_m, sm_l, sm_vs, warp, lane, [] { __syncthreads(); });
}
