// ladder/stage3_4.cuh: stages 3 and 4, WMMA with the online softmax fused in
// registers on the accumulator fragments (see attention.cu's table).
#pragma once
// ---------------------------------------------------------------------------
// Stages 3-4: WMMA, fused softmax. WARPS warps per block, 16 query rows per
// warp, BN keys per tile. The staging ring holds STAGES tiles of FP8 K/V; each tile is
// decoded to f16 for the tensor cores.
// ---------------------------------------------------------------------------

// Tile configuration from tiles.h (chosen to keep static shared memory
// under 48 KB): 16 query rows per warp.
template <int D, int STAGE> struct WTiles {
  static_assert(STAGE == 3 || STAGE == 4, "stage_wmma runs stages 3 and 4");
  static constexpr int WARPS = Tiles<STAGE, D>::THREADS / 32;
  static constexpr int BN = Tiles<STAGE, D>::BN;
  static_assert(Tiles<STAGE, D>::BM == 16 * WARPS, "16 query rows per warp");
};

template <int D, int STAGE>
struct WSmem {
  static constexpr int WARPS = WTiles<D, STAGE>::WARPS, BN = WTiles<D, STAGE>::BN, BM = 16 * WARPS;
  static constexpr int STAGES = Tiles<STAGE, D>::RING;
  __align__(16) uint8_t k8[STAGES][BN * D];
  __align__(16) uint8_t v8[STAGES][BN * D];
  __align__(32) uint16_t k16[BN * D];  // f16 bit patterns (no constructors in __shared__)
  __align__(32) uint16_t v16[BN * D];
  __align__(32) uint16_t q16[BM * D];
};

template <int D, int STAGE>
__device__ void stage_wmma(const Params& p) {
  using Cfg = WSmem<D, STAGE>;
  auto H = [](const uint16_t* x) { return reinterpret_cast<const half*>(x); };
  constexpr int WARPS = Cfg::WARPS, BN = Cfg::BN, BM = Cfg::BM, STAGES = Cfg::STAGES;
  constexpr int THREADS = 32 * WARPS, NT = BN / 16, DT = D / 16;
  __shared__ Cfg sm;
  const Head hd = head_of(p);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int i0 = blockIdx.x * BM, w0 = i0 + 16 * warp;  // first row of the block, of the warp
  load_q_f16<BM, D, THREADS>(p, hd.q, i0, sm.q16);
  const int nmax = visible_keys(p, min((int)p.sq - 1, i0 + BM - 1));
  const int tiles = (nmax + BN - 1) / BN;
  // Prologue: fill STAGES-1 slots of the ring.
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, s * BN, sm.k8[s], sm.v8[s], tid);
    cp_async_commit();
  }
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> qf[DT];
#pragma unroll
  for (int kk = 0; kk < DT; kk++) wmma::load_matrix_sync(qf[kk], H(sm.q16 + 16 * warp * D + 16 * kk), D);

  // Per-warp softmax state: each lane owns rows g and g+8.
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> of[DT];
#pragma unroll
  for (int n = 0; n < DT; n++) wmma::fill_fragment(of[n], 0.f);
  int n_rows[2];
  for (int k = 0; k < 2; k++) {
    int row = w0 + (lane >> 2) + 8 * k;
    n_rows[k] = row < p.sq ? visible_keys(p, row) : 0;
  }

  for (int t = 0; t < tiles; t++) {
    const int slot = t % STAGES, j0 = t * BN;
    {
      int pre = t + STAGES - 1;
      if (pre < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, pre * BN, sm.k8[pre % STAGES], sm.v8[pre % STAGES], tid);
      cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();
    __syncthreads();
    decode_tile<BN, D, THREADS>(sm.k8[slot], sm.v8[slot], sm.k16, sm.v16);
    __syncthreads();
    // S = Q Kᵀ: B[k = d][n = key] is K row-major [key][d], i.e. col_major.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf[NT];
#pragma unroll
    for (int n = 0; n < NT; n++) {
      wmma::fill_fragment(sf[n], 0.f);
#pragma unroll
      for (int kk = 0; kk < DT; kk++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> kf;
        wmma::load_matrix_sync(kf, H(sm.k16 + n * 16 * D + kk * 16), D);
        wmma::mma_sync(sf[n], qf[kk], kf, sf[n]);
      }
    }
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> pf[NT];
    {
      // Fused: softmax on the accumulator fragments in registers.
      float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 8; i++) {
          const int k = (i >> 1) & 1, col = j0 + 16 * n + acc_col(lane, i);
          float v = col < n_rows[k] ? sf[n].x[i] * hd.score_scale : NEG_INF;
          sf[n].x[i] = v;
          mx[k] = fmaxf(mx[k], v);
        }
      float alpha[2], m_use[2];
#pragma unroll
      for (int k = 0; k < 2; k++) {
        const OnlineStep st = online_step(m[k], group_max<4>(mx[k]));
        alpha[k] = st.alpha, m_use[k] = st.m_use;
      }
      float sum[2] = {0.f, 0.f};
#pragma unroll
      for (int n = 0; n < NT; n++)
#pragma unroll
        for (int i = 0; i < 8; i++) {
          const int k = (i >> 1) & 1;
          const float e = exp2f(sf[n].x[i] - m_use[k]);
          sum[k] += e;
          // matrix_a (row-major f16) holds in elements i and i+8 the
          // positions the accumulator holds in element i (hardware dump).
          pf[n].x[i] = pf[n].x[i + 8] = __float2half(e);
        }
#pragma unroll
      for (int k = 0; k < 2; k++) {
        l[k] = l[k] * alpha[k] + group_sum<4>(sum[k]);
      }
#pragma unroll
      for (int dt = 0; dt < DT; dt++) {
#pragma unroll
        for (int i = 0; i < 8; i++) of[dt].x[i] *= alpha[(i >> 1) & 1];
#pragma unroll
        for (int n = 0; n < NT; n++) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> vf;
          wmma::load_matrix_sync(vf, H(sm.v16 + n * 16 * D + dt * 16), D);
          wmma::mma_sync(of[dt], pf[n], vf, of[dt]);
        }
      }
    }
    __syncthreads();  // k16/v16 and the ring slot are reused next iteration
  }
  cp_async_wait<0>();
  // Epilogue: O / l, scaled by the V descale.
#pragma unroll
  for (int dt = 0; dt < DT; dt++)
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int k = (i >> 1) & 1, row = w0 + acc_row(lane, i);
      const bool any = row_has_keys(l[k]);
      if (row < p.sq)
        hd.out[(long long)row * p.o_row_stride + 16 * dt + acc_col(lane, i)] = any ? of[dt].x[i] * (hd.out_scale / l[k]) : 0.f;
    }
  if (hd.lse && (lane & 3) == 0)
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const int row = w0 + (lane >> 2) + 8 * k;
      if (row < p.sq) hd.lse[row] = row_lse(m[k], l[k]);
    }
}