// paged/merge_warps.cuh: merge_warps, the merge of a block's warps' rows.
// Included by paged.cu only, in its order.
#pragma once

// RowStats are a merged row's: the largest of the warps' maxima, the sum L
// of their sums weighed by 2^(m_w - max), and whether a sum was NaN.
struct RowStats {
  float mx, L;
  bool nan;
};

// merge_exp2 is the merges' exponential: ex2 (the SFU's, subnormal results
// flushed: a warp or split weighs 0 where it is below 2^-126 of the
// largest); row_stats reduces by trees.
__device__ __forceinline__ float merge_exp2(float x) {
  return ex2(x);
}

// row_stats works row r's stats out of the W warps' maxima and sums (every
// value loaded at once: no load waits on another).
template <int W>
__device__ __forceinline__ RowStats row_stats(float (*sm_m)[8], float (*sm_l)[8], int r) {
  float mw[W], lw[W];
#pragma unroll
  for (int w = 0; w < W; w++) {
    mw[w] = sm_m[w][r];
    lw[w] = sm_l[w][r];
  }
  RowStats rs{NEG_INF, 0.f, false};
#pragma unroll
  for (int w = 0; w < W; w++) rs.nan = rs.nan || lw[w] != lw[w];
  static_assert((W & (W - 1)) == 0, "a tree over the warps");
  float t[W];
#pragma unroll
  for (int w = 0; w < W; w++) t[w] = mw[w];
#pragma unroll
  for (int h = W / 2; h > 0; h /= 2)
#pragma unroll
    for (int w = 0; w < h; w++) t[w] = fmaxf(t[w], t[w + h]);
  rs.mx = t[0];
#pragma unroll
  for (int w = 0; w < W; w++) t[w] = rs.mx != NEG_INF && mw[w] != NEG_INF ? merge_exp2(mw[w] - rs.mx) * lw[w] : 0.f;
#pragma unroll
  for (int h = W / 2; h > 0; h /= 2)
#pragma unroll
    for (int w = 0; w < h; w++) t[w] += t[w + h];
  rs.L = t[0];
  return rs;
}

// merge_warps combines the states of unit u of W warps (warp 0..W-1, lane):
// each puts its rows' maxima and sums in sm_m, sm_l and its V units in
// sm_vs; after a barrier every lane works its own row's stats out and puts
// its values in so ([W][8][SO] floats; with SO = D+8 the eight rows of a
// warp's 64-bit stores fall on four bank offsets, two wavefronts a store,
// where D apart conflicts eight ways) already weighed, times
// 2^(m_w - max)·vs_w·2^-12 / L (NaN for a row with a NaN sum, 0 for a warp
// or row that saw no key; with sinks and one split, L plus the row's head's
// 2^(sink - max): the final denominator, where the sink joins it once; with
// splits the split merge adds it, and L, like the log-sum-exp, stays over
// the keys), while the first lanes of warp 0 write the rows'
// log-sum-exps and where their outputs start; after a second barrier the
// W·32 threads write the unit's rows, Σ_w so_w, to out (one split) or to
// its partial rows. sync is the barrier of those threads; it runs first,
// so that so may hold something else until then. (Working the weights out
// again for every element, or one lane a row working them out for every
// warp between two more barriers, measured slower: 0.86 of 1.8 us at the
// end of a unit, TestWSTimeline.)
template <int D, int SO, int W, bool LEADER = false, class State, class Sync>
__device__ __forceinline__ void merge_warps(const PagedParams& p, const PagedUnit& u, const State& st, float* so,
                                            float (*sm_m)[8], float (*sm_l)[8], float* sm_vs, int warp, int lane,
                                            Sync sync) {
  __shared__ long long row_out[8];
  sync();
  WS_STAMP(warp == 0 && lane == 0, 16);
  st.put_stats(sm_m, sm_l, sm_vs, warp, lane);
  sync();
  WS_STAMP(warp == 0 && lane == 0, 17);
  const long long item = u.item;
  // row_end writes row r's log-sum-exp (partial or final) and puts where
  // its output goes in row_out.
  auto row_end = [&](const RowStats& rs, int r) {
    const float lse2 = rs.nan ? __int_as_float(0x7fffffff) : (rs.L > 0.f ? rs.mx + log2f(rs.L) : NEG_INF);
    if (p.splits > 1) {
      row_out[r] = ((item * p.splits + u.split) * 8 + r) * D;
      p.part_lse[(item * p.splits + u.split) * 8 + r] = lse2;
    } else {
      const int rr = u.r0 + r, hh = u.kh * u.group + rr % u.group, ii = rr / u.group;
      row_out[r] = q_row(p, u.b, hh, ii);
      if (p.lse) p.lse[lse_at(p, u.b, hh, ii)] = lse2 * LN2;
    }
  };
  {
    const int r = State::row(lane);
    const RowStats rs = row_stats<W>(sm_m, sm_l, r);
    const float mine = sm_m[warp][r];
    float sc = 0.f, den = rs.L;
    if (p.sinks != nullptr && p.splits == 1 && rs.L > 0.f)  // (a sink far above the keys: den = inf, sc = 0)
      den += merge_exp2(sink_log2(p, u.kh * u.group + (u.r0 + r) % u.group) - rs.mx);
    if (rs.nan)
      sc = __int_as_float(0x7fffffff);
    else if (rs.L > 0.f && mine != NEG_INF)
      sc = merge_exp2(mine - rs.mx) * 0x1p-12f * sm_vs[warp] / den;
    st.template put_rows<SO>(so, warp, lane, sc);
    // LEADER (the warp-specialized kernel): the first lane of warp 0 that
    // holds row r writes its end from the stats it has. Otherwise lane r of
    // warp 0 works them out again (the cp.async kernel: keeping the stats
    // live past put_rows spilled its D=256 build for sm_80 and sm_89).
    if constexpr (LEADER) {
      if (warp == 0 && State::leads(lane) && r < u.rows_n) row_end(rs, r);
    }
  }
  if constexpr (!LEADER) {
    if (warp == 0 && lane < u.rows_n) row_end(row_stats<W>(sm_m, sm_l, lane), lane);
  }
  sync();
  WS_STAMP(warp == 0 && lane == 0, 18);
  float* dst = p.splits > 1 ? p.part_out : p.out;
  // (Rows start at multiples of D floats in dst and of SO in so: four
  // columns a thread, 16-byte accesses, where dst is 16-byte aligned.)
  if (((uintptr_t)dst & 15) == 0) {
    static_assert(D % 4 == 0 && SO % 4 == 0, "16-byte rows");
    for (int e = warp * 32 + lane; e < u.rows_n * (D / 4); e += W * 32) {
      const int r = e / (D / 4), d = 4 * (e % (D / 4));
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int w = 0; w < W; w++) {
        const float4 x = *(const float4*)&so[(w * 8 + r) * SO + d];
        acc.x += x.x;
        acc.y += x.y;
        acc.z += x.z;
        acc.w += x.w;
      }
      *(float4*)&dst[row_out[r] + d] = acc;
    }
  } else {
    for (int e = warp * 32 + lane; e < u.rows_n * D; e += W * 32) {
      const int r = e / D, d = e % D;
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < W; w++) acc += so[(w * 8 + r) * SO + d];
      dst[row_out[r] + d] = acc;
    }
  }
  WS_STAMP(warp == 0 && lane == 0, 19);
}
