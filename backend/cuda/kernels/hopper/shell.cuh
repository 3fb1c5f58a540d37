// hopper/shell.cuh: the parts of stage9's shell (hopper/attention.cuh)
// that are functions of their own: the producer warpgroup's copies and the
// consumers' epilogue. Included by hopper.cuh only, inside namespace
// hopper, before hopper/attention.cuh.
#pragma once

// produce is the producer warpgroup's thread 0 (the tiled and one-tile
// forms; the quantizing form has no copies): Q's block of ROWS rows, then
// the ntiles K and V tiles from key tile t0 on (0 in the one-tile form)
// through the RING-deep ring, each slot refilled once
// the consumers' eight warps have released it; in the one-tile form both
// tiles at once into ring slots 0 and 1, on slot 0's barriers.
template <int D, bool ONE>
__device__ __forceinline__ void produce(const Params& p, int b, int h, int kvh, int i0, int t0, int ntiles, long long sq_p,
                                        long long sk_p, uint8_t* s_q, uint8_t* s_k, uint8_t* s_v, uint64_t* q_full,
                                        uint64_t* k_full, uint64_t* v_full, uint64_t* empty) {
  using G = Geometry<D>;
  constexpr int DK = G::DK, RING = G::RING, ROWS = ONE ? G::ONE_BM : G::BM;
  const uint8_t* qimg = p.qi + ((long long)b * p.hq + h) * sq_p * DK + (long long)i0 * DK;
  const uint8_t* kimg = p.ki + ((long long)b * p.hkv + kvh) * sk_p * DK + (long long)t0 * G::KT;
  const uint8_t* vimg = p.vi + ((long long)b * p.hkv + kvh) * sk_p * D + (long long)t0 * G::VT;
  mbar_expect_tx(q_full, ROWS * DK);
  bulk_load(s_q, qimg, ROWS * DK, q_full);
  if constexpr (ONE) {  // both tiles into ring slots 0 and 1, on slot 0's barriers
    mbar_expect_tx(&k_full[0], 2 * G::KT);
    bulk_load(s_k, kimg, 2 * G::KT, &k_full[0]);
    mbar_expect_tx(&v_full[0], 2 * G::VT);
    bulk_load(s_v, vimg, 2 * G::VT, &v_full[0]);
  }
  for (int t = 0; !ONE && t < ntiles; t++) {
    const int s = t % RING;
    loop_stamp(true, 2, t, 0);
    if (t >= RING) mbar_wait(&empty[s], (t / RING - 1) & 1);
    mbar_expect_tx(&k_full[s], G::KT);
    bulk_load(s_k + s * G::KT, kimg + (long long)t * G::KT, G::KT, &k_full[s]);
    mbar_expect_tx(&v_full[s], G::VT);
    bulk_load(s_v + s * G::VT, vimg + (long long)t * G::VT, G::VT, &v_full[s]);
    loop_stamp(true, 2, t, 1);
  }
}

// store_row writes one of a consumer thread's two rows of o (half 0 its
// row r0, half 1 its row r0 + 8: the accumulator's layout, wmma.WGMMAAcc)
// at orow, times f, or zeros for a row that saw no key; columns from d on
// (Params::d: a head dim below D, padded with zero columns) are not
// written. The epilogue and the key split's epilogue_part (split.cuh)
// store through it.
template <int D>
__device__ __forceinline__ void store_row(float* orow, const float (&o)[D / 2], int half, float f, bool keys, int tq,
                                          long long d) {
#pragma unroll
  for (int i = 2 * half; i < D / 2; i += 4) {
    const int col = 8 * (i / 4) + 2 * tq;
    const float2 v = keys ? make_float2(o[i] * f, o[i + 1] * f) : make_float2(0.f, 0.f);
    if (col < d) *(float2*)(orow + col) = v;  // a head dim below D: its zero columns stay
  }
}

// epilogue_row is the epilogue's work for one of the thread's rows (half 0
// its row r0, half 1 r0 + 8), its float32 sum l already summed over the
// quad: the row at orow and, where lse is not null, its LSE there. The
// packed form's epilogue (hopper/packed.cuh) takes it; epilogue keeps its
// own copy of these lines, since called from it this helper gives every
// entry other SASS.
template <int D>
__device__ __forceinline__ void epilogue_row(float* orow, float* lse, const float (&o)[D / 2], float m, float l, float lsum, float vs,
                                             float sink, bool summed, int half, int tq, long long d) {
  const bool keys = row_has_keys(summed ? l : lsum);
  const float f = vs / (lsum + ex2(sink - m + 8.f));
  store_row<D>(orow, o, half, f, keys, tq, d);
  if (lse && tq == 0) *lse = row_lse(m - 8.f, l);
}

// epilogue writes a consumer thread's rows r0 and r0 + 8 (those below sq)
// of the output: o normalized by the rows' sums of rounded weights lsum,
// with the sink's weight 2^(sink - m + 8) added (sink in the log2 domain;
// -Inf for none, which adds exactly 0), and scaled by V's descale vs
// (zeros for a row that saw no key), and their LSEs (over the keys alone)
// from the maxima m and the float32 sums l, each first summed over the
// row's quad. Where l was not taken (summed false: no LSE, softmax_tile),
// lsum tells the rows without keys: a row with keys has a weight of 2^8
// at its maximum, so lsum > 0 exactly where l > 0, and either is NaN where
// the other is, while the row's maximum in the log2 domain is under 2^28
// (past it, 8 - m rounds to -m: docs/design/hopper-prefill.md's open
// items).
template <int D>
__device__ __forceinline__ void epilogue(const Params& p, const float (&o)[D / 2], const float (&m)[2], const float (&l)[2],
                                         const float (&lsum)[2], float vs, float sink, bool summed, int b, int h, int r0, int tq,
                                         int sq) {
  const float l0 = group_sum<4>(l[0]), l1 = group_sum<4>(l[1]);
  float* out = p.out + b * p.o_batch_stride + h * p.o_head_stride;
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int row = r0 + 8 * half;
    if (row >= sq) continue;
    const float lh = half ? l1 : l0;
    const bool keys = row_has_keys(summed ? lh : lsum[half]);
    const float f = vs / (lsum[half] + ex2(sink - m[half] + 8.f));
    store_row<D>(out + row * p.o_row_stride, o, half, f, keys, tq, p.d);
    if (p.lse && tq == 0) p.lse[(b * p.hq + h) * p.sq + row] = row_lse(m[half] - 8.f, lh);
  }
}
