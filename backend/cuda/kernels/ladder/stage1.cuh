// ladder/stage1.cuh: stage 1, the scalar baseline (see attention.cu's table).
#pragma once
// ---------------------------------------------------------------------------
// Stage 1: scalar. 8 threads per query row; FP8 K/V tiles through a 2-deep
// cp.async ring, decoded through a 256-entry table; S and P in shared memory.
// ---------------------------------------------------------------------------
template <int D>
__device__ void stage1(const Params& p) {
  using T = Tiles<1, D>;
  constexpr int BM = T::BM, BN = T::BN, THREADS = T::THREADS, TPR = THREADS / BM, DPT = D / TPR;
  static_assert(T::RING == 2, "stage 1 double-buffers its tiles");
  __shared__ float table[256];
  __shared__ float sq[BM][D];
  __shared__ __align__(16) uint8_t sk8[2][BN * D];
  __shared__ __align__(16) uint8_t sv8[2][BN * D];
  __shared__ float sp[BM][BN];
  const Head hd = head_of(p);
  const int tid = threadIdx.x, r = tid / TPR, sub = tid % TPR;
  const int i0 = blockIdx.x * BM, i = i0 + r;
  for (int c = tid; c < 256; c += THREADS) table[c] = e4m3_to_float((uint8_t)c);
  __syncthreads();
  for (int c = tid; c < BM * D; c += THREADS) {
    int rr = c / D, dd = c % D;
    sq[rr][dd] = (i0 + rr < p.sq) ? table[hd.q[(long long)(i0 + rr) * p.q_row_stride + dd]] : 0.f;
  }
  const int nmax = visible_keys(p, min((int)p.sq - 1, i0 + BM - 1));
  const int n_row = i < p.sq ? visible_keys(p, i) : 0;
  float m = NEG_INF, l = 0.f, o[DPT];
  for (int k = 0; k < DPT; k++) o[k] = 0.f;
  const int tiles = (nmax + BN - 1) / BN;
  if (tiles > 0) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, 0, sk8[0], sv8[0], tid);
  cp_async_commit();
  for (int t = 0; t < tiles; t++) {
    const int buf = t & 1, j0 = t * BN;
    if (t + 1 < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, j0 + BN, sk8[buf ^ 1], sv8[buf ^ 1], tid);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    // Scores for keys j0 + sub + 8u.
    float s[BN / TPR], mx = NEG_INF;
#pragma unroll
    for (int u = 0; u < BN / TPR; u++) {
      int jj = sub + TPR * u;
      float acc = 0.f;
#pragma unroll 8
      for (int dd = 0; dd < D; dd++) acc += sq[r][dd] * table[sk8[buf][jj * D + dd]];
      s[u] = (j0 + jj < n_row) ? acc * hd.score_scale : NEG_INF;
      mx = fmaxf(mx, s[u]);
    }
    mx = group_max<TPR>(mx);
    const OnlineStep st = online_step(m, mx);
    const float alpha = st.alpha, m_use = st.m_use;
    float sum = 0.f;
#pragma unroll
    for (int u = 0; u < BN / TPR; u++) {
      float e = exp2f(s[u] - m_use);
      sp[r][sub + TPR * u] = e;
      sum += e;
    }
    sum = group_sum<TPR>(sum);
    l = l * alpha + sum;
    __syncwarp();
    for (int k = 0; k < DPT; k++) {
      int dd = sub * DPT + k;
      float acc = o[k] * alpha;
      for (int jj = 0; jj < BN; jj++) acc += sp[r][jj] * table[sv8[buf][jj * D + dd]];
      o[k] = acc;
    }
    __syncthreads();  // the buffer is refilled next iteration
  }
  if (i < p.sq) {
    const bool any = row_has_keys(l);
    const float inv = hd.out_scale / l;
    for (int k = 0; k < DPT; k++) hd.out[(long long)i * p.o_row_stride + sub * DPT + k] = any ? o[k] * inv : 0.f;
    if (hd.lse && sub == 0) hd.lse[i] = row_lse(m, l);
  }
}
