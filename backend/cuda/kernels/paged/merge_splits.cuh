// paged/merge_splits.cuh: fp8attn_paged_merge and merge_row_warp, the merge
// of an item's splits. Included by paged.cu only, in its order.
#pragma once

constexpr int MERGE_THREADS = 256;

// SplitWeights are a row's split weights (in shared memory) summed, with
// the largest split LSE (log2) and whether any split was NaN.
struct SplitWeights {
  float sum, mx;
  bool nan;
  // lse2 is the row's log2-sum-exp: NaN if a split was, -inf if no split
  // saw a key.
  __device__ __forceinline__ float lse2() const {
    return nan ? __int_as_float(0x7fffffff) : (sum > 0.f ? mx + log2f(sum) : NEG_INF);
  }
};

// sink_weight is what query head h's sink adds to a row's split weights w:
// 2^(sink - mx), 0 without sinks or for a row no split saw a key for (it
// stays zeros); inf for a sink far above the keys (the row is then 0).
__device__ __forceinline__ float sink_weight(const PagedParams& p, int h, const SplitWeights& w) {
  return p.sinks != nullptr && w.sum > 0.f ? exp2f(sink_log2(p, h) - w.mx) : 0.f;
}

// split_weights: one warp weighs the splits of row r of item, wts[s] =
// 2^(lse_s - max) (0 for a split that saw no key), lane s taking splits s,
// s+32, ... (loads through L2: other blocks wrote them; each LSE is loaded
// once, kept in wts until it is weighed).
__device__ __forceinline__ SplitWeights split_weights(const PagedParams& p, long long item, int r, int lane,
                                                      float* wts) {
  const int S = p.splits;
  const float* lse = p.part_lse + item * S * 8 + r;
  float mx = NEG_INF;
  bool nan = false;
  for (int s = lane; s < S; s += 32) {
    const float x = __ldcg(lse + s * 8);
    wts[s] = x;  // weighed in place below (by this lane)
    mx = fmaxf(mx, x);
    nan = nan || x != x;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  nan = __any_sync(0xffffffffu, nan);
  float sum = 0.f;
  for (int s = lane; s < S; s += 32) {
    const float x = wts[s];
    const float w = x == NEG_INF ? 0.f : exp2f(x - mx);
    wts[s] = w;
    sum += w;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return {sum, mx, nan};
}

// weigh_splits sums wts[s] times columns d..d+3 of split s's partial row
// (part + s·8·D) over s = s0, s0+step, ... < S, SPLIT_LOADS loads in flight
// (16: one trip to L2 for the 16 splits of a B1 decode step; with 8,
// two, and the step 0.1-0.2 us longer).
constexpr int SPLIT_LOADS = 16;
__device__ __forceinline__ float4 weigh_splits(const float* part, const float* wts, int D, int d, int s0, int S,
                                               int step) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll SPLIT_LOADS
  for (int s = s0; s < S; s += step) {
    const float w = wts[s];
    const float4 x = __ldcg((const float4*)(part + (long long)s * 8 * D + d));
    acc.x += w * x.x;
    acc.y += w * x.y;
    acc.z += w * x.z;
    acc.w += w * x.w;
  }
  return acc;
}

// merge_row combines the splits of row r of item (b, kh, rb) with 8 warps
// (warp, lane): warp 0 weighs the row's splits into wts; then warp w sums
// splits w, w+8, ... with four columns a lane (16-byte loads, all in
// flight, through L2: another block may have written them), and the warps'
// sums are added through part_sum. sync is the barrier of the 8 warps; wts,
// part_sum and the two scalars may be reused once merge_row returns.
template <class Sync>
__device__ __forceinline__ void merge_row(const PagedParams& p, int b, int kh, int rb, long long item, int r, int warp,
                                          int lane, float* wts, float (*part_sum)[256], float* row_sum, float* row_lse,
                                          Sync sync) {
  const int D = p.d, S = p.splits, group = p.hq / p.hkv, r0 = rb * 8;
  const int rr = r0 + r, hh = kh * group + rr % group, ii = rr / group;
  if (warp == 0) {
    const SplitWeights w = split_weights(p, item, r, lane, wts);
    if (lane == 0) {
      // The sink joins the denominator here, once (sink_weight); the
      // log-sum-exp stays over the keys.
      *row_sum = w.nan ? __int_as_float(0x7fffffff) : w.sum + sink_weight(p, hh, w);
      *row_lse = w.lse2();
    }
  }
  sync();
  const float sum = *row_sum;
  const float* part = p.part_out + (item * S * 8 + r) * D;  // split s at part + s·8·D
  for (int d = 4 * lane; d < D; d += 128) {
    *(float4*)&part_sum[warp][d] =
        sum > 0.f ? weigh_splits(part, wts, D, d, warp, S, 8) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  sync();
  for (int d = warp * 32 + lane; d < D; d += MERGE_THREADS) {
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < 8; w++) acc += part_sum[w][d];
    float val = sum > 0.f ? acc / sum : 0.f;
    if (sum != sum) val = sum;
    p.out[q_row(p, b, hh, ii) + d] = val;
  }
  if (warp == 0 && lane == 0 && p.lse) p.lse[lse_at(p, b, hh, ii)] = *row_lse * LN2;
}

// Combines the splits of each row: with w_s = 2^(lse_s - max), out = Σ
// w_s·out_s / Σ w_s and lse = max + log2 Σ w_s (natural log on output). A row
// no split saw a key for gets zeros and -inf; a NaN in any split stays NaN.
// Grid (hkv·row_blocks, b, 8 rows), or (items, 1, 8 rows) for a varlen
// batch, 256 threads: merge_row.
extern "C" __global__ void __launch_bounds__(MERGE_THREADS) fp8attn_paged_merge(const PagedParams p) {
  pdl_entry();
  __shared__ float wts[256];                        // the row's split weights (splits <= 256)
  __shared__ __align__(16) float part_sum[8][256];  // each warp's column sums (D <= 256)
  __shared__ float row_sum, row_lse;
  const int r = blockIdx.z;
  int b, kh, rb, sq;
  long long item;
  if (p.q_starts) {
    item = blockIdx.x;
    const int2 br = p.var_blocks[blockIdx.x / p.hkv];
    b = br.x, rb = br.y, kh = blockIdx.x % p.hkv, sq = p.q_starts[b + 1] - p.q_starts[b];
  } else {
    kh = blockIdx.x / p.row_blocks, rb = blockIdx.x % p.row_blocks, b = blockIdx.y, sq = p.sq;
    item = ((long long)b * p.hkv + kh) * p.row_blocks + rb;
  }
  if (r >= min(8, p.hq / p.hkv * sq - rb * 8)) return;
  merge_row(p, b, kh, rb, item, r, threadIdx.x >> 5, threadIdx.x & 31, wts, part_sum, &row_sum, &row_lse,
            [] { __syncthreads(); });
}

// merge_row_warp is merge_row for one warp alone (the warp-specialized
// kernel's last split of an item runs one a row): lane l owns columns 4l..4l+3
// (D <= 128). For each chunk of
// SPLIT_LOADS splits every lane loads the chunk's log-sum-exps and its four
// columns of each split's partial row at once, then, with m the largest
// log-sum-exp so far, scales what it has summed by 2^(m_before - m) and adds
// 2^(lse_s - m)·row_s (a split that saw no key weighs 0); out = Σ / Σ
// weights. (merge_row instead has lane s weigh splits s, s+32, ... into
// wts, 256 floats of its own, first, then each lane sum its columns over
// every split.)
template <int D>
__device__ __forceinline__ void merge_row_warp(const PagedParams& p, int b, int kh, int rb, int r, int lane,
                                               float* wts) {
  static_assert(D % 4 == 0 && D <= 128, "a lane's four columns cover the row");
  const int S = p.splits, group = p.hq / p.hkv, r0 = rb * 8;
  const long long item = ((long long)b * p.hkv + kh) * p.row_blocks + rb;
  const float* part = p.part_out + (item * S * 8 + r) * D;  // split s at part + s·8·D
  const int rr = r0 + r, hh = kh * group + rr % group, ii = rr / group, d = 4 * lane;
  float* out = p.out + q_row(p, b, hh, ii);
  (void)wts;
  const float* lse = p.part_lse + item * S * 8 + r;
  float mx = NEG_INF, sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  bool nan = false;
  for (int s0 = 0; s0 < S; s0 += SPLIT_LOADS) {
    float l[SPLIT_LOADS];
    float4 x[SPLIT_LOADS];
#pragma unroll
    for (int j = 0; j < SPLIT_LOADS; j++) {
      const int s = s0 + j;
      l[j] = s < S ? __ldcg(lse + s * 8) : NEG_INF;
      x[j] = s < S && d < D ? __ldcg((const float4*)(part + (long long)s * 8 * D + d)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#ifdef FP8ATTN_PROFILE
    asm volatile("" ::"f"(l[0]), "f"(x[0].x));
    WS_STAMP(r == 0 && lane == 0 && s0 == 0, 13);
#endif
    float m = mx;
#pragma unroll
    for (int j = 0; j < SPLIT_LOADS; j++) {
      m = fmaxf(m, l[j]);  // (fmaxf passes a NaN over)
      nan = nan || l[j] != l[j];
    }
    if (m != mx) {  // m > mx: what was summed against mx (nothing while mx = -inf) scales down
      const float c = mx == NEG_INF ? 0.f : merge_exp2(mx - m);
      sum *= c;
      acc = make_float4(acc.x * c, acc.y * c, acc.z * c, acc.w * c);
      mx = m;
    }
#pragma unroll
    for (int j = 0; j < SPLIT_LOADS; j++) {
      const float w = l[j] == NEG_INF ? 0.f : merge_exp2(l[j] - mx);
      sum += w;
      acc.x += w * x[j].x;
      acc.y += w * x[j].y;
      acc.z += w * x[j].z;
      acc.w += w * x[j].w;
    }
  }
  const SplitWeights sw{sum, mx, nan};
  if (d < D) {
    const float inv = sw.sum > 0.f ? 1.f / (sw.sum + sink_weight(p, hh, sw)) : 0.f;
    float4 val = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    if (sw.nan) val = make_float4(__int_as_float(0x7fffffff), __int_as_float(0x7fffffff), __int_as_float(0x7fffffff),
                               __int_as_float(0x7fffffff));
    *(float4*)(out + d) = val;
  }
  WS_STAMP(r == 0 && lane == 0, 14);
  if (lane == 0 && p.lse) p.lse[lse_at(p, b, hh, ii)] = sw.lse2() * LN2;
}
