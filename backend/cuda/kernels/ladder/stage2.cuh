// ladder/stage2.cuh: stage 2, WMMA tensor cores with S, P and O through shared
// memory (see attention.cu's table).
#pragma once
// ---------------------------------------------------------------------------
// Stage 2: WMMA with S, P and O through shared memory. Four warps per block
// of BM query rows share every step of a BN-key tile: decoding it to f16,
// a 16x16 S tile each for two of them (Q·Kᵀ), the softmax with 8 threads
// per row on S in shared memory, and one (D=64) or two (D=128) 16x16 O tiles
// each, rescaled in shared memory and then accumulated (P·V). Shared
// memory: 26 KB (D=64), 47 KB (D=128).
// ---------------------------------------------------------------------------
template <int D> struct S2 {
  static constexpr int BM = Tiles<2, D>::BM, BN = Tiles<2, D>::BN, THREADS = Tiles<2, D>::THREADS, STAGES = Tiles<2, D>::RING;
  static constexpr int TPR = THREADS / BM;  // softmax threads per row
  static constexpr int CPT = BN / TPR;      // columns per softmax thread
  static constexpr int SLD = BN + TPR;      // S row stride: thread (r, sub) reads
                                            // columns sub + TPR k, conflict-free
};

template <int D>
struct S2Smem {
  using C = S2<D>;
  __align__(16) uint8_t k8[C::STAGES][C::BN * D];
  __align__(16) uint8_t v8[C::STAGES][C::BN * D];
  __align__(32) uint16_t k16[C::BN * D];  // f16 bit patterns (no constructors in __shared__)
  __align__(32) uint16_t v16[C::BN * D];
  __align__(32) uint16_t q16[C::BM * D];
  __align__(32) float s[C::BM * C::SLD];
  __align__(32) uint16_t p16[C::BM * C::BN];
  __align__(32) float o[C::BM * D];
  float alpha[C::BM];
};

template <int D>
__device__ void stage2(const Params& p) {
  using C = S2<D>;
  constexpr int BM = C::BM, BN = C::BN, THREADS = C::THREADS, STAGES = C::STAGES, TPR = C::TPR, CPT = C::CPT;
  constexpr int SLD = C::SLD;
  constexpr int DT = D / 16, RT = BM / 16, NT = BN / 16;
  static_assert(RT * NT <= THREADS / 32, "one S tile per warp");
  auto H = [](const uint16_t* x) { return reinterpret_cast<const half*>(x); };
  __shared__ S2Smem<D> sm;
  const Head hd = head_of(p);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int i0 = blockIdx.x * BM;
  load_q_f16<BM, D, THREADS>(p, hd.q, i0, sm.q16);
  for (int c = tid; c < BM * D; c += THREADS) sm.o[c] = 0.f;
  // Softmax ownership: thread tid holds row r's state, columns sub*CPT.. of S.
  const int r = tid / TPR, sub = tid % TPR, row = i0 + r;
  const int n_row = row < p.sq ? visible_keys(p, row) : 0;
  float m = NEG_INF, l = 0.f;
  const int nmax = visible_keys(p, min((int)p.sq - 1, i0 + BM - 1));
  const int tiles = (nmax + BN - 1) / BN;
#pragma unroll
  for (int st = 0; st < STAGES - 1; st++) {
    if (st < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, st * BN, sm.k8[st], sm.v8[st], tid);
    cp_async_commit();
  }
  __syncthreads();
  // This warp's S tile: row tile srt, key tile snt; its Q fragments once.
  const int srt = warp / NT, snt = warp % NT;
  const bool has_s = warp < RT * NT;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> qf[DT];
  if (has_s) {
#pragma unroll
    for (int kk = 0; kk < DT; kk++) wmma::load_matrix_sync(qf[kk], H(sm.q16 + 16 * srt * D + 16 * kk), D);
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
    if (has_s) {  // S tile = Q Kᵀ; B[k = d][n = key] = K[key][d] is col_major
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
      wmma::fill_fragment(sf, 0.f);
#pragma unroll
      for (int kk = 0; kk < DT; kk++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> kf;
        wmma::load_matrix_sync(kf, H(sm.k16 + snt * 16 * D + kk * 16), D);
        wmma::mma_sync(sf, qf[kk], kf, sf);
      }
      wmma::store_matrix_sync(sm.s + 16 * srt * SLD + 16 * snt, sf, SLD, wmma::mem_row_major);
    }
    __syncthreads();
    {  // softmax step of row r over this tile: columns sub + TPR k
      const float* srow = sm.s + r * SLD;
      float v[CPT], mx = NEG_INF;
#pragma unroll
      for (int k = 0; k < CPT; k++) {
        const int c = sub + TPR * k;
        v[k] = j0 + c < n_row ? srow[c] * hd.score_scale : NEG_INF;
        mx = fmaxf(mx, v[k]);
      }
      const OnlineStep st = online_step(m, group_max<TPR>(mx));
      const float alpha = st.alpha, m_use = st.m_use;
      half* prow = reinterpret_cast<half*>(sm.p16) + r * BN;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < CPT; k++) {
        const float e = exp2f(v[k] - m_use);
        sum += e;
        prow[sub + TPR * k] = __float2half(e);
      }
      sum = group_sum<TPR>(sum);
      l = l * alpha + sum;
      if (sub == 0) sm.alpha[r] = alpha;
    }
    __syncthreads();
    for (int ot = warp; ot < RT * DT; ot += THREADS / 32) {  // O tile (row tile ort, columns 16 dt) += P V
      const int ort = ot / DT, dt = ot % DT;
      // This warp's O tile rescaled in shared memory first (lane: one
      // column, every other row).
      float* ot_rows = sm.o + 16 * ort * D + 16 * dt;
#pragma unroll
      for (int i = 0; i < 8; i++) {
        const int rr = lane / 16 + 2 * i;
        ot_rows[rr * D + lane % 16] *= sm.alpha[16 * ort + rr];
      }
      __syncwarp();
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, sm.o + 16 * ort * D + 16 * dt, D, wmma::mem_row_major);
#pragma unroll
      for (int n = 0; n < NT; n++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> pf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> vf;
        wmma::load_matrix_sync(pf, H(sm.p16 + 16 * ort * BN + 16 * n), BN);
        wmma::load_matrix_sync(vf, H(sm.v16 + n * 16 * D + dt * 16), D);
        wmma::mma_sync(acc, pf, vf, acc);
      }
      wmma::store_matrix_sync(sm.o + 16 * ort * D + 16 * dt, acc, D, wmma::mem_row_major);
    }
    __syncthreads();  // O, k16/v16 and the ring slot are reused next tile
  }
  cp_async_wait<0>();
  // Epilogue: O / l, scaled by the V descale; row r's TPR threads share it.
  const bool any = row_has_keys(l);
  if (row < p.sq) {
    for (int c = sub; c < D; c += TPR)
      hd.out[(long long)row * p.o_row_stride + c] = any ? sm.o[r * D + c] * (hd.out_scale / l) : 0.f;
    if (hd.lse && sub == 0) hd.lse[row] = row_lse(m, l);
  }
}