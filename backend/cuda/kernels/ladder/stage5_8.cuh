// ladder/stage5_8.cuh: stages 5-8, the keys of a 16-row query tile split across
// warps, fragments filled from FP8 (see attention.cu's table).
#pragma once
// ---------------------------------------------------------------------------
// Stage 5: split-KV warps, FP8 fragments filled directly.
// ---------------------------------------------------------------------------
// Stage 5: KS = 4 (D=64) or 2 (D=128) warps, 2-slot rings. Stage 6: twice
// the warps, 1-slot rings (the shared memory of the rings is what bounds KS).
template <int D, int STAGE> struct S5 {
  static constexpr int KS = Tiles<STAGE, D>::THREADS / 32;  // warps (key splits) per block
  static constexpr int BN = Tiles<STAGE, D>::BN;            // keys per tile
  static constexpr int ROW = D + 16;  // padded tile row (bytes): conflict-free fragment loads
  static constexpr int RING = Tiles<STAGE, D>::RING;
  static_assert(Tiles<STAGE, D>::BM == 16 && BN == 32, "one 16-row query tile, 32-key tiles");
  static constexpr int TILE = BN * ROW;  // bytes of one K (or V) tile
};

// matrix_b fragment (either major; the logical positions are the same) from
// an FP8 tile: element i of lane l holds B[k][n] with
// k = 2t + (i&1) + 8((i>>1)&1), n = g + 8((i>>2)&1), elements 8-15 repeating
// 0-7 (hardware dump, package wmma). at(k, n) gives the tile byte offset.
// fill_b_pairs is fill_b for a tile where (k, n) and (k+1, n) are adjacent
// bytes (K as the col-major B of Q·Kᵀ): one 2-byte load and one paired
// conversion per two elements.
template <typename Frag, typename At>
__device__ __forceinline__ void fill_b_pairs(Frag& f, const uint8_t* tile, int lane, At at) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 8; i += 2) {
    const int k = 2 * t + 8 * ((i >> 1) & 1), n = g + 8 * ((i >> 2) & 1);
    __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2(*(const __nv_fp8x2_storage_t*)(tile + at(k, n)), __NV_E4M3));
    f.x[i] = f.x[i + 8] = h.x;
    f.x[i + 1] = f.x[i + 9] = h.y;
  }
}

// fill_b_kpairs is fill_b for a tile where (k, n) and (k+1, n) are in
// consecutive rows (V as the row-major B of P·V): two byte loads joined into
// one pair and one paired conversion per two elements.
template <typename Frag, typename At>
__device__ __forceinline__ void fill_b_kpairs(Frag& f, const uint8_t* tile, int lane, At at) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 8; i += 2) {
    const int k = 2 * t + 8 * ((i >> 1) & 1), n = g + 8 * ((i >> 2) & 1);
    const unsigned lo = tile[at(k, n)], hi = tile[at(k + 1, n)];
    __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(lo | (hi << 8)), __NV_E4M3));
    f.x[i] = f.x[i + 8] = h.x;
    f.x[i + 1] = f.x[i + 9] = h.y;
  }
}

template <typename Frag, typename At>
__device__ __forceinline__ void fill_b(Frag& f, const uint8_t* tile, int lane, At at) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const int k = 2 * t + (i & 1) + 8 * ((i >> 1) & 1), n = g + 8 * ((i >> 2) & 1);
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)tile[at(k, n)], __NV_E4M3);
    f.x[i] = f.x[i + 8] = __half(h);
  }
}

template <int D, int STAGE>
__device__ void stage5(const Params& p) {
  using C = S5<D, STAGE>;
  constexpr int KS = C::KS, BN = C::BN, ROW = C::ROW, DT = D / 16, NT = BN / 16;
  __shared__ __align__(16) uint8_t ring[KS][C::RING][2][C::TILE];  // [warp][slot][K,V]
  __shared__ float mrow[KS][16], lrow[KS][16];
  const Head hd = head_of(p);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
  const int i0 = blockIdx.x * 16;
  const int nmax = visible_keys(p, min((int)p.sq - 1, i0 + 15));
  const int nmin = visible_keys(p, i0);  // the block's first row sees the fewest keys
  const int tiles = (nmax + BN - 1) / BN;

  // Q fragments straight from global FP8 (matrix_a row-major: element i at
  // row g + 8((i>>1)&1), column 2t + (i&1) + 8(i>>2); 8-15 repeat 0-7).
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> qf[STAGE >= 7 ? 1 : DT];
  // Stage 7: mma.m16n8k32 e4m3 A fragments (PTX ISA; hardware products in
  // testdata/wmma): register r holds row g + 8(r&1), columns
  // 32kk + 16(r>>1) + 4t .. +3: four FP8 bytes, one 32-bit load.
  uint32_t qa[D / 32][4];
  if constexpr (STAGE >= 7) {
#pragma unroll
    for (int kk = 0; kk < D / 32; kk++)
#pragma unroll
      for (int r = 0; r < 4; r++) {
        const int row = i0 + g + 8 * (r & 1), col = 32 * kk + 16 * (r >> 1) + 4 * t4;
        qa[kk][r] = row < p.sq ? *(const uint32_t*)(hd.q + (long long)row * p.q_row_stride + col) : 0u;
      }
  } else {
#pragma unroll
  for (int kk = 0; kk < DT; kk++)
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
      const int r = g + 8 * ((i >> 1) & 1), c = 16 * kk + 2 * t4 + 8 * (i >> 2);
      __nv_fp8x2_storage_t two = 0;
      if (i0 + r < p.sq) two = *(const __nv_fp8x2_storage_t*)(hd.q + (long long)(i0 + r) * p.q_row_stride + c);
      __half2_raw h2 = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
      __half2 hh = __half2(h2);
      qf[kk].x[i] = qf[kk].x[i + 8] = hh.x;
      qf[kk].x[i + 1] = qf[kk].x[i + 9] = hh.y;
    }
  }

  // This warp's tiles: warp, warp + KS, ...
  auto load = [&](int tile, int slot) {
    load_kv_tile<BN, D, 32, ROW>(p, hd.k, hd.v, tile * BN, ring[warp][slot][0], ring[warp][slot][1], lane);
  };
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> of[DT];
#pragma unroll
  for (int n = 0; n < DT; n++) wmma::fill_fragment(of[n], 0.f);
  int n_rows[2];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    const int row = i0 + g + 8 * k;
    n_rows[k] = row < p.sq ? visible_keys(p, row) : 0;
  }
  if (warp < tiles) load(warp, 0);
  cp_async_commit();
  int slot = 0;
  for (int tile = warp; tile < tiles; tile += KS, slot = (slot + 1) % C::RING) {
    if constexpr (C::RING > 1) {
      if (tile + KS < tiles) load(tile + KS, (slot + 1) % C::RING);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    const uint8_t* kt = ring[warp][slot][0];
    const uint8_t* vt = ring[warp][slot][1];
    const int j0 = tile * BN;
    // S tile as accumulator elements: stage 7 in m16n8 C fragments (element
    // j of n-tile n8: row g + 8(j>>1), key 8n8 + 2t + (j&1)), stages 5-6 in
    // WMMA 16x16 accumulators (element i of tile n: row g + 8((i>>1)&1),
    // key 16n + acc_col). sv/scol give each element's value and key column.
    constexpr int NE = BN / 2;  // score elements per lane: 16 rows x BN keys / 32 lanes
    float sv[NE];
    if constexpr (STAGE >= 7) {
#pragma unroll
      for (int n8 = 0; n8 < BN / 8; n8++) {
        float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < D / 32; kk++) {
          // mma.m16n8k32 e4m3 B: register r holds k = 16r + 4t .. +3 (d), n = g (key).
          const uint8_t* kb = kt + (8 * n8 + g) * ROW + 32 * kk + 4 * t4;
          const uint32_t b0 = *(const uint32_t*)kb, b1 = *(const uint32_t*)(kb + 16);
          asm(  // no side effects: let the compiler schedule it
              "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
              : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
              : "r"(qa[kk][0]), "r"(qa[kk][1]), "r"(qa[kk][2]), "r"(qa[kk][3]), "r"(b0), "r"(b1));
        }
#pragma unroll
        for (int j = 0; j < 4; j++) sv[4 * n8 + j] = c[j];
      }
    } else {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf[NT];
#pragma unroll
      for (int n = 0; n < NT; n++) {
        wmma::fill_fragment(sf[n], 0.f);
#pragma unroll
        for (int kk = 0; kk < DT; kk++) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> kf;
          // B[k = d][n = key] = K[key][d]
          if constexpr (STAGE == 6)
            fill_b_pairs(kf, kt, lane, [&](int k, int nn) { return (16 * n + nn) * ROW + 16 * kk + k; });
          else
            fill_b(kf, kt, lane, [&](int k, int nn) { return (16 * n + nn) * ROW + 16 * kk + k; });
          wmma::mma_sync(sf[n], qf[kk], kf, sf[n]);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) sv[8 * n + i] = sf[n].x[i];
      }
    }
    // Element e's row slot and key column: for stage 7, e = 4n8 + j; for
    // WMMA, e = 8n + i. Both give slot ((e>>1)&1).
    auto scol = [&](int e) {
      return STAGE >= 7 ? 8 * (e >> 2) + 2 * t4 + (e & 1) : 16 * (e >> 3) + acc_col(lane, e & 7);
    };
    const bool full = j0 + BN <= nmin;  // every row of the block sees the whole tile
    float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
    for (int e = 0; e < NE; e++) {
      const int k = (e >> 1) & 1;
      float v = sv[e] * hd.score_scale;
      if (!full && j0 + scol(e) >= n_rows[k]) v = NEG_INF;
      sv[e] = v;
      mx[k] = fmaxf(mx[k], v);
    }
    float alpha[2], m_use[2];
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const OnlineStep st = online_step(m[k], group_max<4>(mx[k]));
      alpha[k] = st.alpha, m_use[k] = st.m_use;
    }
    // P as WMMA matrix_a (row-major f16): element i of 16-key tile n holds
    // the accumulator position i, i.e. WMMA element 8n + i, or, from m16n8
    // C fragments, element j = i&3 of 8-key tile 2n + (i>>2): the same
    // (row, key) by the verified layouts, so registers carry over directly.
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> pf[NT];
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int e = 0; e < NE; e++) {
      const int k = (e >> 1) & 1;
      const float x = exp2f(sv[e] - m_use[k]);
      sum[k] += x;
      const int n = e >> 3, i = STAGE >= 7 ? (((e >> 2) & 1) << 2) | (e & 3) : (e & 7);
      pf[n].x[i] = pf[n].x[i + 8] = __float2half(x);
    }
#pragma unroll
    for (int k = 0; k < 2; k++) {
      l[k] = l[k] * alpha[k] + group_sum<4>(sum[k]);
    }
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
      for (int i = 0; i < 8; i++) of[dt].x[i] *= alpha[(i >> 1) & 1];
    if constexpr (STAGE == 8) {
      // V through f16: each 16-key half of the tile is decoded into this
      // warp's K slot (free once Q·Kᵀ is done), rows ROWH halves apart, and
      // every B fragment is one ldmatrix.x4.trans. With .trans, lane 4g+t
      // gets rows 2t, 2t+1 of column g of each 8x8 matrix: B[k][n] at
      // k = 2t, 2t+1 and n = g, i.e. fragment registers 0-3 (keys +0/+8 x
      // d +0/+8, the hardware-verified matrix_b layout), 4-7 repeating them.
      constexpr int ROWH = D + 8;  // 16-byte rows 4 banks apart: conflict-free ldmatrix
      static_assert(16 * ROWH * 2 <= C::TILE, "half a V tile in f16 must fit the K slot");
      uint16_t* v16 = reinterpret_cast<uint16_t*>(ring[warp][slot][0]);
#pragma unroll
      for (int n = 0; n < NT; n++) {
        __syncwarp();  // the K slot's previous readers (Q·Kᵀ, or the last half's ldmatrix) are done
        {
          const int r = lane >> 1, h = lane & 1;  // key 16n + r, bytes [h D/2, (h+1) D/2)
          const uint4* src = reinterpret_cast<const uint4*>(vt + (16 * n + r) * ROW + h * (D / 2));
          uint4* dst = reinterpret_cast<uint4*>(v16 + r * ROWH + h * (D / 2));
#pragma unroll
          for (int c = 0; c < D / 32; c++) {  // 16 FP8 bytes in, 32 bytes of f16 out
            const uint4 w = src[c];
            const uint32_t in[4] = {w.x, w.y, w.z, w.w};
            uint32_t out[8];
#pragma unroll
            for (int j = 0; j < 4; j++) {
              const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(in[j] & 0xffff), __NV_E4M3);
              const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(in[j] >> 16), __NV_E4M3);
              out[2 * j] = lo.x | ((uint32_t)lo.y << 16);
              out[2 * j + 1] = hi.x | ((uint32_t)hi.y << 16);
            }
            dst[2 * c] = make_uint4(out[0], out[1], out[2], out[3]);
            dst[2 * c + 1] = make_uint4(out[4], out[5], out[6], out[7]);
          }
        }
        __syncwarp();
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> vf;
          const int q = lane >> 3;  // the 8x8 matrix this lane addresses a row of
          const unsigned addr = (unsigned)__cvta_generic_to_shared(v16 + (8 * (q & 1) + (lane & 7)) * ROWH + 16 * dt + 8 * (q >> 1));
          uint32_t r0, r1, r2, r3;
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                       : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                       : "r"(addr));
          uint32_t* x = reinterpret_cast<uint32_t*>(vf.x);
          x[0] = x[4] = r0;
          x[1] = x[5] = r1;
          x[2] = x[6] = r2;
          x[3] = x[7] = r3;
          wmma::mma_sync(of[dt], pf[n], vf, of[dt]);
        }
      }
    } else {
#pragma unroll
      for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int n = 0; n < NT; n++) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> vf;
          // B[k = key][n = d] = V[key][d]
          fill_b_kpairs(vf, vt, lane, [&](int k, int nn) { return (16 * n + k) * ROW + 16 * dt + nn; });
          wmma::mma_sync(of[dt], pf[n], vf, of[dt]);
        }
    }
    __syncwarp();  // this slot is refilled RING tiles on
    if constexpr (C::RING == 1) {
      if (tile + KS < tiles) load(tile + KS, 0);
      cp_async_commit();
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp done with its ring: reuse it for the merge
  // Each warp's partial O (16 x D floats) into its own ring space.
  float* opart = reinterpret_cast<float*>(ring[warp][0][0]);
  static_assert(16 * D * sizeof(float) <= C::RING * 2 * C::TILE, "merge buffer does not fit the ring");
#pragma unroll
  for (int dt = 0; dt < DT; dt++) wmma::store_matrix_sync(opart + 16 * dt, of[dt], D, wmma::mem_row_major);
  if (t4 == 0) {
#pragma unroll
    for (int k = 0; k < 2; k++) mrow[warp][g + 8 * k] = m[k], lrow[warp][g + 8 * k] = l[k];
  }
  __syncthreads();
  // Merge: O = Σ_w 2^(m_w - m*) O_w, l = Σ_w 2^(m_w - m*) l_w. The factors
  // (divided by l) once per (warp, row), then every output element.
  if (threadIdx.x < 16) {
    const int r = threadIdx.x;
    float ms = NEG_INF;
#pragma unroll
    for (int w = 0; w < KS; w++) ms = fmaxf(ms, mrow[w][r]);
    const float mu = ms == NEG_INF ? 0.f : ms;
    float f[KS], lsum = 0.f;
#pragma unroll
    for (int w = 0; w < KS; w++) {
      f[w] = exp2f(mrow[w][r] - mu);
      lsum += f[w] * lrow[w][r];
    }
    const bool any = row_has_keys(lsum);
    const float norm = any ? hd.out_scale / lsum : 0.f;
#pragma unroll
    for (int w = 0; w < KS; w++) mrow[w][r] = f[w] * norm;  // m_w is no longer needed
    lrow[0][r] = any ? 1.f : 0.f;                           // nor is l_w: the row's flag
    if (hd.lse && i0 + r < p.sq) hd.lse[i0 + r] = row_lse(ms, lsum);
  }
  __syncthreads();
  // Four adjacent outputs of one row per thread: one factor load per warp,
  // 16-byte loads of the partials, one 16-byte store.
  for (int c = threadIdx.x; c < 16 * D / 4; c += 32 * KS) {
    const int r = (4 * c) / D, d = (4 * c) % D, row = i0 + r;
    if (row >= p.sq) continue;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < KS; w++) {
      const float f = mrow[w][r];
      const float4 part = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(ring[w][0][0]) + r * D + d);
      o.x += f * part.x, o.y += f * part.y, o.z += f * part.z, o.w += f * part.w;
    }
    if (lrow[0][r] == 0.f) o = make_float4(0.f, 0.f, 0.f, 0.f);  // no key: zeros, even if a partial is NaN
    float* dst = hd.out + (long long)row * p.o_row_stride + d;
    if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
      *reinterpret_cast<float4*>(dst) = o;
    } else {
      dst[0] = o.x, dst[1] = o.y, dst[2] = o.z, dst[3] = o.w;
    }
  }
}