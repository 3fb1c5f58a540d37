// hopper/split.cuh: the key split of the tiled tensor form and of the
// fused form (stage9fs; TensorParams' splits): the parts' epilogue and the
// merge of the parts. Included by
// hopper.cuh only, inside namespace hopper, after shell.cuh (store_row)
// and tensors.cuh.
//
// Where a grid has fewer blocks than the SMs and long rows of keys (a
// chunk of new queries after a long context), the blocks' key tiles are
// divided into parts that run as blocks of their own (stage9 with SPLIT),
// and merge_parts combines them. Row i's part s holds O_s = vs·o_s/lsum_s
// and the log2-domain sums w_s = m_s - 8 + log2 lsum_s (its rounded
// weights, 2^(m_s-8) lsum_s = Σ rounded 2^x) and f_s = m_s - 8 + log2 l_s
// (its float32 weights). The unsplit epilogue writes
//   vs·o / (lsum + 2^(sink - m + 8)) = Σ_s 2^w_s O_s / (Σ_s 2^w_s + 2^sink)
// and the LSE (m - 8 + log2 l)·ln2 = ln2·log2 Σ_s 2^f_s, which is what the
// merge computes, so the rows stay normalized by the weights that
// multiplied V and the sink joins each denominator once.

// epilogue_part writes a consumer thread's rows r0 and r0 + 8 (those below
// sq) as part part of tp's split: O_s (zeros for a row that saw no key of
// the part) and w_s, f_s (-Inf for such a row; a NaN sum propagates).
template <int D>
__device__ __forceinline__ void epilogue_part(const TensorParams& tp, const float (&o)[D / 2], const float (&m)[2],
                                              const float (&l)[2], const float (&lsum)[2], float vs, int part, int b, int h,
                                              int r0, int tq, int sq) {
  const Params& p = tp.f.p;
  const float l0 = group_sum<4>(l[0]), l1 = group_sum<4>(l[1]);
  const long long rows = p.b * p.hq * p.sq, head = ((long long)part * p.b + b) * p.hq + h;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = r0 + 8 * half;
    if (row >= sq) continue;
    const float lh = half ? l1 : l0;
    const bool keys = row_has_keys(lh);
    const float f = vs / lsum[half];
    store_row<D>(tp.part_o + (head * p.sq + row) * p.d, o, half, f, keys, tq, p.d);
    if (tq == 0) {
      float* w = tp.part_w + head * p.sq + row;
      w[0] = keys ? m[half] - 8.f + log2f(lsum[half]) : NEG_INF;
      w[(long long)tp.splits * rows] = keys ? m[half] - 8.f + log2f(lh) : NEG_INF;
    }
  }
}

// merge_parts: one warp a row (b, h, row), blockDim.x / 32 rows a block,
// grid x over the B·Hq·Sq rows: the row's output (in the caller's layout,
// p.out's strides) and LSE (where p.lse) from its splits parts. A row no
// part saw a key of gets zeros and -Inf, as unsplit; a NaN weight or value
// propagates (fmaxf passes over a NaN weight, whose 2^(w - M) is NaN, and
// a row whose parts' weights are all NaN is not taken for one without
// keys).
__device__ __forceinline__ void merge_parts(const TensorParams& tp) {
  const Params& p = tp.f.p;
  const int splits = (int)tp.splits, lane = threadIdx.x % 32;
  const long long rows = p.b * p.hq * p.sq;
  const long long r = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;
  const int row = (int)(r % p.sq), h = (int)(r / p.sq % p.hq), b = (int)(r / p.sq / p.hq);
  const float* w = tp.part_w + r;  // part s: w[s·rows], its float32 sum's w[(splits + s)·rows]
  float mw = NEG_INF, mf = NEG_INF;
  bool nan = false;
  for (int s = 0; s < splits; s++) {
    const float ws = w[s * rows];
    nan |= ws != ws;
    mw = fmaxf(mw, ws);
    mf = fmaxf(mf, w[(splits + s) * rows]);
  }
  float* out = p.out + b * p.o_batch_stride + h * p.o_head_stride + row * p.o_row_stride;
  if (mw == NEG_INF && !nan) {  // no part saw a key of the row
    for (int c = lane; c < p.d; c += 32) out[c] = 0.f;
    if (p.lse && lane == 0) p.lse[r] = NEG_INF;
    return;
  }
  const float sink = p.sinks ? p.sinks[h] * LOG2E : NEG_INF;
  float den = ex2(sink - mw), fs = 0.f;
  for (int s = 0; s < splits; s++) {
    den += ex2(w[s * rows] - mw);
    fs += ex2(w[(splits + s) * rows] - mf);
  }
  for (int c = lane; c < p.d; c += 32) {
    float acc = 0.f;
    for (int s = 0; s < splits; s++) {
      const float ws = w[s * rows];
      if (ws != NEG_INF) acc += ex2(ws - mw) * tp.part_o[(s * rows + r) * p.d + c];  // (a part without keys adds nothing)
    }
    out[c] = acc / den;
  }
  if (p.lse && lane == 0) p.lse[r] = (mf + log2f(fs)) * LN2;
}
