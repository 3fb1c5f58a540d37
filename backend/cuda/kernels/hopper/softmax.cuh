// hopper/softmax.cuh: a consumer thread's online softmax of one score tile
// and the packing of its weights into wgmma A registers, for stage9's
// consumer warpgroups (hopper/mainloop.cuh). Included by hopper.cuh only,
// inside namespace hopper, before hopper/mainloop.cuh.
#pragma once

// RowKeys are the keys a consumer thread's rows r0 and r0 + 8 see, lo0 ..
// hi0 - 1 and lo1 .. hi1 - 1 (first_key and visible_keys), and, over its
// warpgroup's 64 rows, the fewest keys a row sees from 0 (hi_min, the
// first row's) and the latest first key (lo_max, the last row's): a tile
// inside both bounds needs no mask.
struct RowKeys {
  int lo0, hi0, lo1, hi1, hi_min, lo_max;
};

// The online softmax of tile t (keys t·SN ..) on s: masked keys (outside
// a row's keys, and keys past sk, zero in the image) become -Inf; row
// maxima on the raw scores (c > 0), then in the log2 domain; P·2^8 =
// exp2(s·c - m + 8), one FFMA and one EX2 a weight, so that E4M3 holds P
// in [2^-17, 256]. SOFTCAP first replaces each raw score s by tanh(s ·
// cap_in), and c is then the cap in the log2 domain (the capped score in
// the log2 domain is c·tanh(s·cap_in)): one FMUL and one TANH more a
// score, before the mask, so that a masked key stays -Inf. Returns the
// rescale factors of rows r0 and r0 + 8 (o is left to the caller: a P·V
// may still be running on it). KEYROWS (the paged form, hopper/paged.cuh):
// score column c of each 32 holds key key_of_row(c), K's rows having been
// laid out in key_row's order, so the mask reads the key there.
// s holds the thread's SN/2 scores of rows r0 (elements with i & 2 == 0)
// and r0 + 8; m and l the rows' running maxima (log2 domain) and float32
// sums; c the score factors of rows r0 and r0 + 8 (one factor for both but
// in the paged form, whose rows each have their own); rk the rows' keys. The float32 sums are the
// LSE's alone: without SUMS (a call that asks for no LSE) they are not
// taken and l stays 0, one FADD a score fewer; the epilogue then finds
// the rows without keys from the tensor cores' sums.
template <int SN, bool SOFTCAP, bool SUMS, bool KEYROWS = false>
__device__ __forceinline__ float2 softmax_tile(float (&s)[SN / 2], float (&m)[2], float (&l)[2], float2 c, float cap_in, int t,
                                               int tq, const RowKeys& rk) {
  if constexpr (SOFTCAP) {
#pragma unroll
    for (int i = 0; i < SN / 2; i++) s[i] = tanh_approx(s[i] * cap_in);
  }
  // One branch around the whole mask, so that full tiles do not run it
  // predicated off.
  if ((t + 1) * SN > rk.hi_min || t * SN < rk.lo_max) {
#pragma unroll
    for (int i = 0; i < SN / 2; i++) {
      const int col = 8 * (i / 4) + 2 * tq + (i & 1);
      const int key = t * SN + (KEYROWS ? (col & ~31) | key_of_row(col & 31) : col);
      if (key >= ((i & 2) ? rk.hi1 : rk.hi0) || key < ((i & 2) ? rk.lo1 : rk.lo0)) s[i] = NEG_INF;
    }
  }
  // Row maxima and sums over CH independent chains per row (element i
  // of the thread belongs to row (i >> 1) & 1, chain (i >> 2) % CH): a
  // single chain is a run of dependent instructions that two warps per
  // scheduler cannot hide.
  constexpr int CH = 4;
  float mx[2][CH];
#pragma unroll
  for (int j = 0; j < CH; j++) mx[0][j] = mx[1][j] = NEG_INF;
#pragma unroll
  for (int i = 0; i < SN / 2; i++) mx[(i >> 1) & 1][(i >> 2) % CH] = fmaxf(mx[(i >> 1) & 1][(i >> 2) % CH], s[i]);
  const float mx0 = fmaxf(fmaxf(mx[0][0], mx[0][1]), fmaxf(mx[0][2], mx[0][3]));
  const float mx1 = fmaxf(fmaxf(mx[1][0], mx[1][1]), fmaxf(mx[1][2], mx[1][3]));
  const OnlineStep st0 = online_step(m[0], group_max<4>(mx0) * c.x), st1 = online_step(m[1], group_max<4>(mx1) * c.y);
  const float off0 = 8.f - st0.m_use, off1 = 8.f - st1.m_use;
  float sum[2][CH] = {};
#pragma unroll
  for (int i = 0; i < SN / 2; i++) {
    s[i] = ex2(fmaf(s[i], (i & 2) ? c.y : c.x, (i & 2) ? off1 : off0));
    if constexpr (SUMS) sum[(i >> 1) & 1][(i >> 2) % CH] += s[i];
  }
  l[0] = fmaf(l[0], st0.alpha, (sum[0][0] + sum[0][1]) + (sum[0][2] + sum[0][3]));
  l[1] = fmaf(l[1], st1.alpha, (sum[1][0] + sum[1][1]) + (sum[1][2] + sum[1][3]));
  return make_float2(st0.alpha, st1.alpha);
}

// a = the weights in s as E4M3 A registers (keys in sigma order).
template <int SN> __device__ __forceinline__ void pack_weights(const float (&s)[SN / 2], uint32_t (&a)[SN / 32][4]) {
#pragma unroll
  for (int k = 0; k < SN / 32; k++) {
    const int j = 16 * k;
    a[k][0] = pack4(s[j + 0], s[j + 1], s[j + 4], s[j + 5]);
    a[k][1] = pack4(s[j + 2], s[j + 3], s[j + 6], s[j + 7]);
    a[k][2] = pack4(s[j + 8], s[j + 9], s[j + 12], s[j + 13]);
    a[k][3] = pack4(s[j + 10], s[j + 11], s[j + 14], s[j + 15]);
  }
}
