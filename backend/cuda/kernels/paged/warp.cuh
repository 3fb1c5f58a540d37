// paged/warp.cuh: what the attention kernels share: units and their fast
// divisions, and the warp states PagedWarp and PagedWarpT (a warp's rows,
// its tiles' scores, softmax and P·V). Included by paged.cu only, in its
// order.
#pragma once

// ---------------------------------------------------------------------------
// Attention.


__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* smem) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}

// Four E4M3 codes (the bytes of x) as two f16 pairs: bytes 0, 1 in lo,
// bytes 2, 3 in hi. From compute_89 on, the halves of x go to the hardware
// conversions as they are (no mask or shift: ptxas reads a register's
// halves directly); compute_80 has no E4M3 conversion instruction, and
// cuda_fp8.h's does it in integer arithmetic.
__device__ __forceinline__ void e4m3x4_to_f16x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
#if __CUDA_ARCH__ >= 890
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
#else
  const __half2_raw l = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x & 0xffffu), __NV_E4M3);
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(x >> 16), __NV_E4M3);
  lo = (uint32_t)l.x | ((uint32_t)l.y << 16);
  hi = (uint32_t)h.x | ((uint32_t)h.y << 16);
#endif
}

// Splits a, b into f16 pairs: hi = (a, b) rounded, lo = the rest rounded.
__device__ __forceinline__ void split_f16x2(float a, float b, uint32_t& hi, uint32_t& lo) {
  __half2 h = __floats2half2_rn(a, b);
  float2 hf = __half22float2(h);
  __half2 l = __floats2half2_rn(a - hf.x, b - hf.y);
  hi = *(uint32_t*)&h;
  lo = *(uint32_t*)&l;
}

// 2^x by the SFU (ex2.approx, relative error about 2^-22, far inside the
// float32 tier; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A work unit: the query rows of sequence b's KV head kh in row block rb
// (8 rows; row r0+g is query head kh·G + (r0+g)%G at position (r0+g)/G, G
// the query heads a KV head serves) against the tiles [ta, tb) of key split
// split. Units are numbered item-major (an item, a (b, kh, rb), has its
// splits consecutive): unit u writes partial rows u. Under a sliding window
// an item's splits start at the tile of its first row's lowest key
// (window_lo), not at tile 0: a unit reads only the tiles its rows' windows
// reach, and the host plans the splits over that span (seqTiles).
struct PagedUnit {
  int b, kh, rb, split, group, r0, rows_n, n, ta, tb;
  int sq;    // the sequence's new queries: p.sq, or its count in a varlen batch
  int item;  // (b, kh, rb)'s number: its splits' partial rows
};

// FastDiv divides 0 <= n < 2^31 by a fixed d >= 1 with a multiply-high, an
// add and a shift (Granlund and Montgomery; CUTLASS's FastDivmod): s =
// ceil(log2 d), m = floor(2^32·(2^s - d)/d) + 1, n/d = (umulhi(n, m) + n) >> s.
// Making one costs a 64-bit division; a runtime int division costs some 20
// dependent instructions. The warp-specialized kernel makes its divisors
// before pdl_wait (PagedDivs): a unit's place from its number took 11 such
// divisions, 1.2 us between a block's first loads and its first copy
// (TestWSTimeline).
struct FastDiv {
  int d;
  unsigned m, s;
  __device__ __forceinline__ explicit FastDiv(int d_) : d(d_) {
    s = 32 - __clz(d - 1);
    m = (unsigned)((((unsigned long long)((1ull << s) - d)) << 32) / (unsigned)d) + 1;
  }
  __device__ __forceinline__ int div(int n) const { return (int)((__umulhi((unsigned)n, m) + (unsigned)n) >> s); }
  __device__ __forceinline__ int mod(int n) const { return n - div(n) * d; }
};

// PlainDiv is the runtime division, for code run once a block (the cp.async
// kernel's unit).
struct PlainDiv {
  int d;
  __device__ __forceinline__ int div(int n) const { return n / d; }
};

// window_lo is the lowest key query i of a sequence n keys long with sq
// new queries sees under p's sliding window (its position n - sq + i, mask
// 2), 0 without one.
__device__ __forceinline__ int window_lo(const PagedParams& p, int n, int sq, int i) {
  return p.window > 0 ? max(0, n - sq + i - p.window + 1) : 0;
}

// q_row is where query i of sequence b in query head h starts in q and out.
__device__ __forceinline__ long long q_row(const PagedParams& p, int b, int h, int i) {
  const long long base = p.q_starts ? (long long)p.q_starts[b] * p.row_stride : (long long)b * p.batch_stride;
  return base + (long long)h * p.head_stride + (long long)i * p.row_stride;
}

// lse_at is the index in lse of query i of sequence b in query head h.
__device__ __forceinline__ long long lse_at(const PagedParams& p, int b, int h, int i) {
  return p.q_starts ? (long long)h * p.q_total + p.q_starts[b] + i : ((long long)b * p.hq + h) * p.sq + i;
}

// unit_bounds fills unit u's rows and tiles from its b, rb, split, n, sq
// and group.
template <class Div>
__device__ __forceinline__ void unit_bounds(const PagedParams& p, PagedUnit& u, const Div& group) {
  u.r0 = u.rb * 8;
  u.rows_n = min(8, u.group * u.sq - u.r0);
  // The keys the unit's last row sees bound its tiles; under a window, the
  // first row's lowest key their start.
  const int last_i = group.div(u.r0 + u.rows_n - 1);
  const int vis_max = p.mask == 2 ? max(0, min(u.n, u.n - u.sq + last_i + 1)) : u.n;
  const int tiles = (vis_max + 31) / 32;
  u.ta = u.split * p.tiles_per_split;
  if (p.window > 0) u.ta += window_lo(p, u.n, u.sq, group.div(u.r0)) / 32;
  u.tb = min(tiles, u.ta + p.tiles_per_split);
}

// paged_unit_n is unit (b, kh, rb, split) of a sequence n keys long; group
// divides by the GQA group p.hq / p.hkv.
template <class Div>
__device__ __forceinline__ PagedUnit paged_unit_n(const PagedParams& p, int b, int kh, int rb, int split, int n,
                                                  const Div& group) {
  PagedUnit u;
  u.b = b;
  u.kh = kh;
  u.rb = rb;
  u.split = split;
  u.group = group.d;
  u.n = n;
  u.sq = p.sq;
  u.item = (b * p.hkv + kh) * p.row_blocks + rb;
  unit_bounds(p, u, group);
  return u;
}

__device__ __forceinline__ PagedUnit paged_unit(const PagedParams& p, int b, int kh, int rb, int split) {
  return paged_unit_n(p, b, kh, rb, split, p.seq_lens[b], PlainDiv{p.hq / p.hkv});
}

// paged_unit_var is split split of item item of a varlen batch. Its place
// comes from memory through volatile loads, which the compiler may not
// merge with an earlier call's: a kernel that works its unit out again
// after the tile loop holds none of it in registers across the loop.
__device__ __forceinline__ PagedUnit paged_unit_var(const PagedParams& p, int item, int split) {
  const volatile int* vb = (const volatile int*)p.var_blocks + 2 * (item / p.hkv);
  const volatile int* qs = (const volatile int*)p.q_starts;
  PagedUnit u;
  u.b = vb[0];
  u.rb = vb[1];
  u.kh = item % p.hkv;
  u.split = split;
  u.group = p.hq / p.hkv;
  u.n = p.seq_lens[u.b];
  u.sq = qs[u.b + 1] - qs[u.b];
  u.item = item;
  unit_bounds(p, u, PlainDiv{u.group});
  return u;
}

// PagedDivs are the warp-specialized kernel's divisors, made before its
// pdl_wait from the launch's parameters alone.
struct PagedDivs {
  FastDiv splits, rbh, row_blocks, hkv, group, page;
  __device__ __forceinline__ explicit PagedDivs(const PagedParams& p)
      : splits(p.splits),
        rbh(p.row_blocks * p.hkv),
        row_blocks(p.row_blocks),
        hkv(p.hkv),
        group(p.hq / p.hkv),
        page(p.page_size) {}
};

// paged_unit_seq is the sequence of unit uid (units numbered item-major).
__device__ __forceinline__ int paged_unit_seq(const PagedDivs& dv, int uid) { return dv.rbh.div(dv.splits.div(uid)); }

// paged_unit_at is unit uid, its sequence n keys long.
__device__ __forceinline__ PagedUnit paged_unit_at(const PagedParams& p, const PagedDivs& dv, int uid, int n) {
  const int split = dv.splits.mod(uid), item = dv.splits.div(uid);
  return paged_unit_n(p, dv.rbh.div(item), dv.hkv.mod(dv.row_blocks.div(item)), dv.row_blocks.mod(item), split, n,
                      dv.group);
}

// load_query_row loads columns 16c+4t..16c+4t+3 of unit u's row r into
// x[c] (zeros for a row past the unit's) and returns qe, the power of two
// that brings the row's largest magnitude into [128, 256) (0 for a row of
// zeros or with a non-finite value); the four lanes of a quad (4g..4g+3)
// hold one row between them and agree on qe.
template <int NC>
__device__ __forceinline__ int load_query_row(const PagedParams& p, const PagedUnit& u, int r, int t,
                                              float4 (&x)[NC]) {
  const int row = u.r0 + r;
  const bool row_ok = r < u.rows_n;
  const int h = u.kh * u.group + row % u.group, i = row / u.group;
  const float* qp = p.q + q_row(p, u.b, h, i);
  float amax = 0.f;
#pragma unroll
  for (int c = 0; c < NC; c++) {
    x[c] = row_ok ? *(const float4*)(qp + 16 * c + 4 * t) : make_float4(0.f, 0.f, 0.f, 0.f);
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x[c].x), fabsf(x[c].y)), fmaxf(fabsf(x[c].z), fabsf(x[c].w))));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  int qe = 0;
  if (amax > 0.f && amax <= 3.4e38f) {
    int ex;
    frexpf(amax, &ex);
    qe = 8 - ex;  // amax·2^qe in [128, 256)
  }
  return qe;
}

// row_visible is the number of keys row r of unit u sees (0 past its rows).
__device__ __forceinline__ int row_visible(const PagedParams& p, const PagedUnit& u, int r) {
  if (r >= u.rows_n) return 0;
  const int i = (u.r0 + r) / u.group;
  return p.mask == 2 ? max(0, min(u.n, u.n - u.sq + i + 1)) : u.n;
}

// RowKeys are the keys a row sees, lo..lo+span-1: a key j is visible where
// (unsigned)(j - lo) < span, one compare whether or not a window raises lo
// (the plain call's lo is 0), so that the window costs the tile nothing.
struct RowKeys {
  int lo, span;
};

// row_keys is row r of unit u's RowKeys (span 0 past its rows, or where its
// window holds no key).
__device__ __forceinline__ RowKeys row_keys(const PagedParams& p, const PagedUnit& u, int r) {
  const int vis = row_visible(p, u, r);
  const int lo = r < u.rows_n ? window_lo(p, u.n, u.sq, (u.r0 + r) / u.group) : 0;
  return {lo, max(0, vis - lo)};
}

// softcap_score caps a log2-domain score x at cap = softcap·log2(e) (inv =
// 1/cap): cap·tanh(x·inv), which is softcap·tanh(s/softcap) for s = x·ln 2.
// tanhf (CUDA's, within 2 ulp: an exponential and a reciprocal, and a
// polynomial near 0) rather than tanh.approx.f32, whose relative error of
// about 2^-11 would move a capped score of 30 by 2^-6 in the exponent, some
// 1% of its weight: these kernels hold the float32 tier (scores to about
// 2^-22 relative), and a tile's 8 scores a lane cost a few instructions
// each beside its MMAs. NaN stays NaN.
__device__ __forceinline__ float softcap_score(float x, float cap, float inv) { return cap * tanhf(x * inv); }

// sink_log2 is query head h's sink logit in the log2 domain (p.sinks not null).
__device__ __forceinline__ float sink_log2(const PagedParams& p, int h) { return p.sinks[h] * 1.44269504088896340736f; }

// BoolTag carries a compile-time flag into a generic lambda (the kernels'
// tile loops, one build without the softcap and one with it, chosen once
// before the loop: the plain loop is what it was).
template <bool B> struct BoolTag {
  static constexpr bool value = B;
};

// PagedRow is what PagedWarp and PagedWarpT keep of a row besides its
// queries and output: the running maximum and sum (log2 domain) and the
// units its output is kept in.
struct PagedRow {
  float m, l, vs_units, vs_seen, pscale;

  __device__ __forceinline__ void reset() {
    m = NEG_INF;
    l = vs_units = vs_seen = 0.f;
    pscale = 4096.f;
  }

  // fold_v_units returns the factor the output is multiplied by before a
  // tile whose page has V scale vs: alpha, the running maximum's rescale,
  // times any change of units. O is kept in units of vs_units, the V scale
  // of a page this warp has read (scales are powers of two, so every ratio
  // below is exact). A page whose scale is within 2^-8..2^3 of the units
  // folds the ratio into its weights, P·2^12·ratio (pscale; below 2^15: the
  // low f16 part keeps the weights' bits down to 2^-29 of the largest), and
  // O stays as it is; a page outside that range, or the first one with
  // values, moves O to its own units. A page of zeros changes nothing. The
  // row sum l has no units.
  __device__ __forceinline__ float fold_v_units(float vs, float alpha) {
    float o_alpha = alpha;
    if (vs != vs_seen) {  // a page boundary (the same for the whole warp)
      vs_seen = vs;
      if (vs != 0.f) {
        const float ratio = vs_units != 0.f ? vs / vs_units : 0.f;
        if (ratio >= 0x1p-8f && ratio <= 8.f) {
          pscale = 4096.f * ratio;
        } else {
          if (vs_units != 0.f) o_alpha *= vs_units / vs;
          vs_units = vs;
          pscale = 4096.f;
        }
      }
    }
    return o_alpha;
  }
};

// rescale_o multiplies the output accumulators by a where any lane's a is
// not 1 (the running maximum moved, or the V units).
template <int N>
__device__ __forceinline__ void rescale_o(float (&o)[N][4], float a) {
  if (__any_sync(0xffffffffu, a != 1.f)) {
#pragma unroll
    for (int j = 0; j < N; j++) {
      o[j][0] *= a;
      o[j][1] *= a;
      o[j][2] *= a;
      o[j][3] *= a;
    }
  }
}

// PagedWarp is one warp's online softmax over the tiles it takes of a unit:
// lane 4g+t holds row g. Both attention kernels run it.
template <int D> struct PagedWarp : PagedRow {
  static constexpr int NC = D / 16, NT = D / 8;
  uint32_t qa[NC][4];  // the query row as A fragments, high and low f16 parts, scaled by 2^qe
  float score_factor;  // softmax scale·log2(e)·2^-qe (times a page's K scale per tile)
  float o[NT][4];
  RowKeys keys;        // the keys row g sees
  float cap, inv_cap;  // the softcap (tile<true>): p.softcap, p.inv_softcap

  // start loads row g of unit u and clears the state.
  __device__ __forceinline__ void start(const PagedParams& p, const PagedUnit& u, int g, int t) {
    keys = row_keys(p, u, g);
    cap = p.softcap;
    inv_cap = p.inv_softcap;
    float4 x[NC];
    const int qe = load_query_row(p, u, g, t, x);
#pragma unroll
    for (int c = 0; c < NC; c++) {
      split_f16x2(ldexpf(x[c].x, qe), ldexpf(x[c].y, qe), qa[c][0], qa[c][1]);
      split_f16x2(ldexpf(x[c].z, qe), ldexpf(x[c].w, qe), qa[c][2], qa[c][3]);
    }
    score_factor = ldexpf(p.score_scale, -qe);
    reset();
#pragma unroll
    for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }

  // tile takes the 32 keys from j0 on: krow is this lane's ldmatrix row of
  // the tile's keys (the shared row the lane names) and ksw its chunk
  // swizzle (chunk c at krow + 16·(c ^ ksw)); sv the tile's values, laid out
  // as v_off says; ks and vs the page's scales. CAP: the scores are capped
  // (softcap_score) before the mask.
  template <bool CAP = false>
  __device__ __forceinline__ void tile(const uint8_t* krow, int ksw, const uint8_t* sv, float ks, float vs, int j0,
                                       int lane, int t) {
    // S = Q·Kᵀ over the 32 keys: n-tile j holds shared rows 8j..8j+7.
    float s[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t kr[4];
      ldmatrix_x4(kr, krow + 16 * (c ^ ksw));  // matrix j = n-tile j, chunk c
#pragma unroll
      for (int j = 0; j < 4; j++) {
        uint32_t b0, b1;
        e4m3x4_to_f16x2(kr[j], b0, b1);
        mma_f16(s[j], qa[c], b0, b1);
      }
    }
    // Scores in the log2 domain; n-tile j, element e (0, 1) is key
    // 16(j>>1) + 4t + 2(j&1) + e. Keys outside the row's are -inf.
    const float f = score_factor * ks;
    const int k0 = j0 - keys.lo;
    float sc[4][2], tmax = NEG_INF;
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int key = k0 + 16 * (j >> 1) + 4 * t + 2 * (j & 1) + e;
        float x = (s[j][e] + s[j][e + 2]) * f;
        if constexpr (CAP) x = softcap_score(x, cap, inv_cap);
        sc[j][e] = (unsigned)key < (unsigned)keys.span ? x : NEG_INF;
        tmax = fmaxf(tmax, sc[j][e]);
      }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
    const float m_new = fmaxf(m, tmax), mref = m_new == NEG_INF ? 0.f : m_new;
    const float alpha = fast_exp2(m - mref);
    m = m_new;
    const float o_alpha = fold_v_units(vs, alpha);
    float psum = 0.f;
    uint32_t pa[2][4];  // A fragments of P·2^12 over keys 0-15 and 16-31
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float p0 = fast_exp2(sc[j][0] - mref), p1 = fast_exp2(sc[j][1] - mref);
      psum += p0 + p1;
      // n-tile 2γ gives a0/a1 (keys 4t, 4t+1 of 16γ), 2γ+1 gives a2/a3.
      split_f16x2(p0 * pscale, p1 * pscale, pa[j >> 1][2 * (j & 1)], pa[j >> 1][2 * (j & 1) + 1]);
    }
    l = l * alpha + psum;
    rescale_o(o, o_alpha);
    // O += P·V: B fragments from the transposed values, four d-tiles an ldmatrix.
#pragma unroll
    for (int gm = 0; gm < 2; gm++) {
#pragma unroll
      for (int j = 0; j + 4 <= NT; j += 4) {
        uint32_t vr[4];
        ldmatrix_x4(vr, sv + v_off(8 * j + lane, gm));
#pragma unroll
        for (int u = 0; u < 4; u++) {
          uint32_t b0, b1;
          e4m3x4_to_f16x2(vr[u], b0, b1);
          mma_f16(o[j + u], pa[gm], b0, b1);
        }
      }
      if constexpr (NT % 4 == 2) {
        uint32_t vr[2];
        ldmatrix_x2(vr, sv + v_off(8 * (NT - 2) + (lane & 15), gm));
#pragma unroll
        for (int u = 0; u < 2; u++) {
          uint32_t b0, b1;
          e4m3x4_to_f16x2(vr[u], b0, b1);
          mma_f16(o[NT - 2 + u], pa[gm], b0, b1);
        }
      }
    }
  }

  // finish sums the row sum over the quad (each lane has its keys' share).
  __device__ __forceinline__ void finish() {
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
  }

  // put_stats puts this warp's maxima and sums in sm_m, sm_l and its V
  // units in sm_vs; row(lane) is the row whose values the lane holds; and
  // put_rows puts this warp's rows, each value times sc (the lane's row's
  // weight; 0 stays 0), in so (row r at so + (warp·8 + r)·SO). merge_warps.
  __device__ __forceinline__ void put_stats(float (*sm_m)[8], float (*sm_l)[8], float* sm_vs, int warp,
                                            int lane) const {
    const int g = lane >> 2, t = lane & 3;
    if (t == 0) {
      sm_m[warp][g] = m;
      sm_l[warp][g] = l;
    }
    if (lane == 0) sm_vs[warp] = vs_units;
  }
  __device__ __forceinline__ static int row(int lane) { return lane >> 2; }
  __device__ __forceinline__ static bool leads(int lane) { return (lane & 3) == 0; }  // the first lane of its row
  template <int SO>
  __device__ __forceinline__ void put_rows(float* so, int warp, int lane, float sc) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NT; j++)
      *(float2*)&so[(warp * 8 + g) * SO + 8 * j + 2 * t] =
          make_float2(sc != 0.f ? (o[j][0] + o[j][2]) * sc : 0.f, sc != 0.f ? (o[j][1] + o[j][3]) * sc : 0.f);
  }
};

// The 16-bit matrix transpose of an 8x8 fragment (lane 4r+c holds row r,
// columns 2c and 2c+1; after it, the same of the transposed matrix).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}

// f16_hi_lo packs v's f16 rounding (low half) and the f16 rounding of the
// rest (high half).
__device__ __forceinline__ uint32_t f16_hi_lo(float v) {
  const __half h = __float2half_rn(v), r = __float2half_rn(v - __half2float(h));
  return (uint32_t)__half_as_ushort(h) | ((uint32_t)__half_as_ushort(r) << 16);
}

// PagedWarpT is PagedWarp for units of at most four rows (a GQA group of up
// to four at one query position: decode), transposed: Sᵀ = K·Qᵀ with the
// tile's 32 keys as the MMA's rows (every row of an m16 tile used, where
// PagedWarp's Q·Kᵀ leaves 8 of its 16 empty at four rows) and row t's
// query as columns 2t (its high f16 part) and 2t+1 (the rest); Oᵀ = Vᵀ·Pᵀ
// likewise, P passed from the Sᵀ accumulators to the B operand by
// movmatrix. Half PagedWarp's MMAs, half its exponentials a lane, the output
// in half the registers. Lane 4g+t holds row t's state. The cache layouts
// are PagedWarp's: the key at shared row 16i+8h+g (key_of_row) is
// 16i+4(g>>1)+2h+(g&1), so the Sᵀ rows a lane holds are the keys whose
// values its V fragments pair them with.
template <int D> struct PagedWarpT : PagedRow {
  static constexpr int NC = D / 16, NT = D / 8, NM = D / 16;
  uint32_t qb[NC][2];  // B fragments of Qᵀ: column g is row g>>1's high (g even) or low part, scaled by 2^qe
  float score_factor;  // row t's: softmax scale·log2(e)·2^-qe (times a page's K scale per tile)
  // Oᵀ: dims 16j+g (o[j][0], o[j][1]: columns 2t, 2t+1) and 16j+8+g
  // (o[j][2], o[j][3]). PagedRow's fields are row t's.
  float o[NM][4];
  RowKeys keys;        // the keys row t sees
  float cap, inv_cap;  // the softcap (tile<true>): p.softcap, p.inv_softcap

  __device__ __forceinline__ void start(const PagedParams& p, const PagedUnit& u, int g, int t) {
    float4 x[NC];  // the queries of row g>>1, as columns g
    const int qe = load_query_row(p, u, g >> 1, t, x);
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t hi0, lo0, hi1, lo1;
      split_f16x2(ldexpf(x[c].x, qe), ldexpf(x[c].y, qe), hi0, lo0);
      split_f16x2(ldexpf(x[c].z, qe), ldexpf(x[c].w, qe), hi1, lo1);
      qb[c][0] = g & 1 ? lo0 : hi0;
      qb[c][1] = g & 1 ? lo1 : hi1;
    }
    // Row t's own: its exponent (from lane 8t, which loaded row t) and the keys it sees.
    score_factor = ldexpf(p.score_scale, -__shfl_sync(0xffffffffu, qe, 8 * t));
    keys = row_keys(p, u, t);
    cap = p.softcap;
    inv_cap = p.inv_softcap;
    reset();
#pragma unroll
    for (int j = 0; j < NM; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  }

  // tile: PagedWarp::tile's arguments and meaning.
  template <bool CAP = false>
  __device__ __forceinline__ void tile(const uint8_t* krow, int ksw, const uint8_t* sv, float ks, float vs, int j0,
                                       int lane, int t) {
    const int g = lane >> 2;
    // Sᵀ over the 32 keys: m-tile i is shared rows 16i..16i+15 (ldmatrix
    // matrices 2i and 2i+1, rows g and g+8 of the fragment).
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; c++) {
      uint32_t kr[4];
      ldmatrix_x4(kr, krow + 16 * (c ^ ksw));
#pragma unroll
      for (int i = 0; i < 2; i++) {
        uint32_t a[4];
        e4m3x4_to_f16x2(kr[2 * i], a[0], a[2]);
        e4m3x4_to_f16x2(kr[2 * i + 1], a[1], a[3]);
        mma_f16(s[i], a, qb[c][0], qb[c][1]);
      }
    }
    const float f = score_factor * ks;
    const int k0 = j0 - keys.lo;
    float sc[2][2], tmax = NEG_INF;
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int key = k0 + 16 * i + 4 * (g >> 1) + 2 * h + (g & 1);
        float x = (s[i][2 * h] + s[i][2 * h + 1]) * f;
        if constexpr (CAP) x = softcap_score(x, cap, inv_cap);
        sc[i][h] = (unsigned)key < (unsigned)keys.span ? x : NEG_INF;
        tmax = fmaxf(tmax, sc[i][h]);
      }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 4));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 8));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 16));
    const float m_new = fmaxf(m, tmax), mref = m_new == NEG_INF ? 0.f : m_new;
    const float alpha = fast_exp2(m - mref);
    m = m_new;
    const float o_alpha = fold_v_units(vs, alpha);
    float psum = 0.f;
    uint32_t pb[2][2];  // B fragments of Pᵀ·2^12: k-step i (keys 16i..16i+15), rows 16i+g and 16i+8+g transposed
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const float pv = fast_exp2(sc[i][h] - mref);
        psum += pv;
        pb[i][h] = movmatrix_trans(f16_hi_lo(pv * pscale));
      }
    l = l * alpha + psum;
    rescale_o(o, o_alpha);
    // Oᵀ += Vᵀ·Pᵀ: A fragments from the values (dims as rows), an ldmatrix
    // for two m-tiles of 16 dims.
#pragma unroll
    for (int i = 0; i < 2; i++) {
#pragma unroll
      for (int j = 0; j + 4 <= NT; j += 4) {
        uint32_t vr[4];
        ldmatrix_x4(vr, sv + v_off(8 * j + lane, i));
#pragma unroll
        for (int mm = 0; mm < 2; mm++) {
          uint32_t a[4];
          e4m3x4_to_f16x2(vr[2 * mm], a[0], a[2]);
          e4m3x4_to_f16x2(vr[2 * mm + 1], a[1], a[3]);
          mma_f16(o[j / 2 + mm], a, pb[i][0], pb[i][1]);
        }
      }
      if constexpr (NT % 4 == 2) {
        uint32_t vr[2];
        ldmatrix_x2(vr, sv + v_off(8 * (NT - 2) + (lane & 15), i));
        uint32_t a[4];
        e4m3x4_to_f16x2(vr[0], a[0], a[2]);
        e4m3x4_to_f16x2(vr[1], a[1], a[3]);
        mma_f16(o[NM - 1], a, pb[i][0], pb[i][1]);
      }
    }
  }

  // finish sums row t's sum over the lanes of its column (each has its keys' share).
  __device__ __forceinline__ void finish() {
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    l += __shfl_xor_sync(0xffffffffu, l, 8);
    l += __shfl_xor_sync(0xffffffffu, l, 16);
  }

  // put_stats, row and put_rows: PagedWarp's (rows 4-7 hold nothing: no
  // maximum, no sum).
  __device__ __forceinline__ void put_stats(float (*sm_m)[8], float (*sm_l)[8], float* sm_vs, int warp,
                                            int lane) const {
    const int g = lane >> 2, t = lane & 3;
    if (g < 2) {
      sm_m[warp][4 * g + t] = g == 0 ? m : NEG_INF;
      sm_l[warp][4 * g + t] = g == 0 ? l : 0.f;
    }
    if (lane == 0) sm_vs[warp] = vs_units;
  }
  __device__ __forceinline__ static int row(int lane) { return lane & 3; }
  __device__ __forceinline__ static bool leads(int lane) { return lane < 4; }  // the first lane of its row
  template <int SO>
  __device__ __forceinline__ void put_rows(float* so, int warp, int lane, float sc) const {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NM; j++) {
      so[(warp * 8 + t) * SO + 16 * j + g] = sc != 0.f ? (o[j][0] + o[j][1]) * sc : 0.f;
      so[(warp * 8 + t) * SO + 16 * j + 8 + g] = sc != 0.f ? (o[j][2] + o[j][3]) * sc : 0.f;
    }
  }
};
