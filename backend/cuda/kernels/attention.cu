// attention.cu: FP8 E4M3 scaled-dot-product attention kernels, kept side by
// side as numbered stages (each complete and validated; later stages faster).
//
//   stage 1  FP8 K/V tiles in shared memory through a 2-deep cp.async ring,
//            decoded through a 256-entry table; scalar float32 math, S and P
//            in shared memory. The GPU baseline.
//   stage 2  stage 1 + tensor cores: WMMA m16n16k16 (f16 in, f32 out) for Q·Kᵀ
//            and P·V. S, P and the running output O go through shared memory;
//            four warps share every step of a 16-row block (S tiles, the
//            softmax 8 threads per row, O tiles).
//   stage 3  online softmax fused in registers on the accumulator fragments,
//            using the layout verified on hardware (package wmma, docs/WMMA.md):
//            row max and row sum through quad shuffles, O rescaled in
//            registers, P handed to P·V register to register (the f16
//            matrix_a fragment holds the accumulator's positions).
//   stage 4  stage 3 with a 3-deep cp.async ring for K/V.
//   stage 5  the keys of a 16-row query tile split across KS warps of the
//            block (each its own online softmax over every KS-th tile and its
//            own cp.async ring, no block barrier in the loop), merged through
//            shared memory at the end; Q, K and V fragments filled straight
//            from the FP8 tiles through the hardware-verified matrix_a and
//            matrix_b layouts (no f16 decode pass); masks only on the tiles
//            that need them.
//   stage 6  stage 5 with twice the key-split warps (8 for D=64, 4 for D=128),
//            1-slot rings so the rings still fit 48 KB, and K read two bytes
//            at a time.
//   stage 7  stage 6 with Q·Kᵀ on the FP8 tensor cores (mma.sync m16n8k32
//            e4m3, sm_89+): Q and K fragments are plain 32-bit loads of FP8
//            bytes, no conversion; the f32 C fragments become P's f16
//            matrix_a fragments register for register.
//   stage 8  stage 7 with V decoded to f16 per 16-key half tile (into the
//            warp's K slot, free after Q·Kᵀ) and its B fragments loaded by
//            ldmatrix.x4.trans instead of byte-wise fills.
//
// Changelog
//   v1 (2026-11-22): stages 1-4, D in {64, 128}, any Sq/Sk, GQA/MQA, both
//                    causal alignments, LSE.
//   v2 (2026-11-22): stage 5 (Nsight Compute on stage 4, mission: 2 warps per
//                    SM, 7% compute throughput: latency-bound).
//   v3 (2026-11-22): stage 6 (twice the key-split warps) and stage 7 (Q·Kᵀ
//                    on the FP8 tensor cores).
//   v4 (2026-11-22): stage 2 on four warps per 16-row block (it ran on one or
//                    two warps: 40.6 us on mission, bound by the warps' own
//                    instruction streams; 64-key tiles on one warp measured
//                    the same). Four warps on 32 rows: 24.2 us; on 16: 19.3.
//   v5 (2026-11-22): stages 5-7: V fragments filled a pair at a time (two
//                    byte loads, one paired conversion); the merge computes
//                    each row's factors once.
//   v6 (2026-11-22): stage 8; stages 5-8 merge four outputs per thread with
//                    16-byte loads and stores.
//
// Conventions: Q, K, V are E4M3 codes, [B][H][S][D] with int64 strides in
// Params; per-(batch, head) dequantization scales; the Q and K scales and
// log2(e) are folded into the softmax scale, the V scale into the output.
// Scores are kept in the log2 domain (exp2); LSE is returned in natural log.
// A row that sees no key gets zeros and LSE -Inf. NaN propagates.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>
#include <stdint.h>
using namespace nvcuda;

// Params is mirrored field for field by backend/cuda/params.go.
struct Params {
  const uint8_t *q, *k, *v;
  const float *q_scale, *k_scale, *v_scale;
  float *out, *lse;  // lse may be null
  long long q_batch_stride, q_head_stride, q_row_stride;
  long long kv_batch_stride, kv_head_stride, kv_row_stride;
  long long o_batch_stride, o_head_stride, o_row_stride;
  long long b, hq, hkv, sq, sk, d, group;
  long long mask;    // 0 none, 1 causal upper-left, 2 causal lower-right
  float scale_log2;  // softmax scale * log2(e)
  float pad_;
};

#define NEG_INF (-__int_as_float(0x7f800000))
#define LN2 0.69314718055994530942f

// Number of keys query row i sees: keys [0, n).
__device__ __forceinline__ int visible_keys(const Params& p, int i) {
  long long n = p.sk;
  if (p.mask == 1) n = i + 1;
  else if (p.mask == 2) n = i + 1 + p.sk - p.sq;
  return (int)max(0LL, min(n, p.sk));
}

// cp.async of 16 bytes, zero-filling when the source row is past the end.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

// Issue the cp.async copies of key/value rows [j0, j0+BN) of one head into
// the staging buffers (BN x D bytes each), zero-filling rows >= sk.
template <int BN, int D, int THREADS>
__device__ __forceinline__ void load_kv_tile(const Params& p, const uint8_t* kh, const uint8_t* vh, int j0,
                                             uint8_t* sk8, uint8_t* sv8) {
  constexpr int CHUNKS = BN * D / 16;
  for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
    int r = c / (D / 16), off = (c % (D / 16)) * 16;
    int j = j0 + r;
    bool ok = j < p.sk;
    long long src = (long long)(ok ? j : 0) * p.kv_row_stride + off;
    cp_async16(sk8 + r * D + off, kh + src, ok);
    cp_async16(sv8 + r * D + off, vh + src, ok);
  }
}

__device__ __forceinline__ float e4m3_to_float(uint8_t c) {
  __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
  return __half2float(__half(h));
}

// Head offsets for grid (query block, query head, batch).
struct Head {
  const uint8_t *q, *k, *v;
  float* out;
  float* lse;
  float score_scale, out_scale;
};
__device__ __forceinline__ Head head_of(const Params& p) {
  int h = blockIdx.y, b = blockIdx.z;
  int kvh = h / (int)p.group;
  Head hd;
  hd.q = p.q + b * p.q_batch_stride + h * p.q_head_stride;
  hd.k = p.k + b * p.kv_batch_stride + kvh * p.kv_head_stride;
  hd.v = p.v + b * p.kv_batch_stride + kvh * p.kv_head_stride;
  hd.out = p.out + b * p.o_batch_stride + h * p.o_head_stride;
  hd.lse = p.lse ? p.lse + (b * p.hq + h) * p.sq : nullptr;
  hd.score_scale = p.scale_log2 * p.q_scale[b * p.hq + h] * p.k_scale[b * p.hkv + kvh];
  hd.out_scale = p.v_scale[b * p.hkv + kvh];
  return hd;
}

// ---------------------------------------------------------------------------
// Stage 1: scalar. 128 threads, 16 query rows per block, 8 threads per row.
// ---------------------------------------------------------------------------
template <int D>
__device__ void stage1(const Params& p) {
  constexpr int BM = 16, BN = 64, THREADS = 128, TPR = 8, DPT = D / TPR;
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
  if (tiles > 0) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, 0, sk8[0], sv8[0]);
  cp_async_commit();
  for (int t = 0; t < tiles; t++) {
    const int buf = t & 1, j0 = t * BN;
    if (t + 1 < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, j0 + BN, sk8[buf ^ 1], sv8[buf ^ 1]);
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
#pragma unroll
    for (int w = 1; w < TPR; w <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, w));
    const float m_new = fmaxf(m, mx), m_use = m_new == NEG_INF ? 0.f : m_new;
    const float alpha = exp2f(m - m_use);
    float sum = 0.f;
#pragma unroll
    for (int u = 0; u < BN / TPR; u++) {
      float e = exp2f(s[u] - m_use);
      sp[r][sub + TPR * u] = e;
      sum += e;
    }
#pragma unroll
    for (int w = 1; w < TPR; w <<= 1) sum += __shfl_xor_sync(0xffffffff, sum, w);
    l = l * alpha + sum;
    m = m_new;
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
    const float inv = l > 0.f || l != l ? hd.out_scale / l : 0.f;
    for (int k = 0; k < DPT; k++) hd.out[(long long)i * p.o_row_stride + sub * DPT + k] = l > 0.f || l != l ? o[k] * inv : 0.f;
    if (hd.lse && sub == 0) hd.lse[i] = (l > 0.f || l != l) ? (m + log2f(l)) * LN2 : NEG_INF;
  }
}

// Decode one staged FP8 tile (BN x D, K and V) to f16.
template <int BN, int D, int THREADS>
__device__ __forceinline__ void decode_tile(const uint8_t* k8, const uint8_t* v8, uint16_t* k16, uint16_t* v16) {
  for (int c = threadIdx.x; c < BN * D / 2; c += THREADS) {
    __half2_raw hk = __nv_cvt_fp8x2_to_halfraw2(*(const __nv_fp8x2_storage_t*)(k8 + 2 * c), __NV_E4M3);
    __half2_raw hv = __nv_cvt_fp8x2_to_halfraw2(*(const __nv_fp8x2_storage_t*)(v8 + 2 * c), __NV_E4M3);
    ((__half2_raw*)k16)[c] = hk;
    ((__half2_raw*)v16)[c] = hv;
  }
}

// ---------------------------------------------------------------------------
// Stage 2: WMMA with S, P and O through shared memory. Four warps per block
// of BM query rows share every step of a BN-key tile: decoding it to f16,
// a 16x16 S tile each for two of them (Q·Kᵀ), the softmax with 8 threads
// per row on S in shared memory, and one (D=64) or two (D=128) 16x16 O tiles
// each, rescaled in shared memory and then accumulated (P·V). Shared
// memory: 26 KB (D=64), 47 KB (D=128).
// ---------------------------------------------------------------------------
template <int D> struct S2 {
  static constexpr int BM = 16, BN = 32, THREADS = 128, STAGES = 2;
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
  for (int c = tid; c < BM * D / 2; c += THREADS) {
    int rr = (2 * c) / D, dd = (2 * c) % D;
    __nv_fp8x2_storage_t two = 0;
    if (i0 + rr < p.sq) two = *(const __nv_fp8x2_storage_t*)(hd.q + (long long)(i0 + rr) * p.q_row_stride + dd);
    ((__half2_raw*)sm.q16)[c] = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
  }
  for (int c = tid; c < BM * D; c += THREADS) sm.o[c] = 0.f;
  // Softmax ownership: thread tid holds row r's state, columns sub*CPT.. of S.
  const int r = tid / TPR, sub = tid % TPR, row = i0 + r;
  const int n_row = row < p.sq ? visible_keys(p, row) : 0;
  float m = NEG_INF, l = 0.f;
  const int nmax = visible_keys(p, min((int)p.sq - 1, i0 + BM - 1));
  const int tiles = (nmax + BN - 1) / BN;
#pragma unroll
  for (int st = 0; st < STAGES - 1; st++) {
    if (st < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, st * BN, sm.k8[st], sm.v8[st]);
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
      if (pre < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, pre * BN, sm.k8[pre % STAGES], sm.v8[pre % STAGES]);
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
#pragma unroll
      for (int off = 1; off < TPR; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, off));
      const float m_new = fmaxf(m, mx), m_use = m_new == NEG_INF ? 0.f : m_new;
      const float alpha = exp2f(m - m_use);
      half* prow = reinterpret_cast<half*>(sm.p16) + r * BN;
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < CPT; k++) {
        const float e = exp2f(v[k] - m_use);
        sum += e;
        prow[sub + TPR * k] = __float2half(e);
      }
#pragma unroll
      for (int off = 1; off < TPR; off <<= 1) sum += __shfl_xor_sync(0xffffffff, sum, off);
      l = l * alpha + sum;
      m = m_new;
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
  const bool any = l > 0.f || l != l;
  if (row < p.sq) {
    for (int c = sub; c < D; c += TPR)
      hd.out[(long long)row * p.o_row_stride + c] = any ? sm.o[r * D + c] * (hd.out_scale / l) : 0.f;
    if (hd.lse && sub == 0) hd.lse[row] = any ? (m + log2f(l)) * LN2 : NEG_INF;
  }
}

// ---------------------------------------------------------------------------
// Stages 3-4: WMMA, fused softmax. WARPS warps per block, 16 query rows per
// warp, BN keys per tile. The staging ring holds STAGES tiles of FP8 K/V; each tile is
// decoded to f16 for the tensor cores.
// ---------------------------------------------------------------------------

// The accumulator layout (hardware-verified, see docs/WMMA.md): element i of
// lane l = 4g + t holds row g + 8*((i>>1)&1), column 2t + (i&1) + 8*(i>>2).
// check_layout() below compares these with the generated header on device.
__device__ __forceinline__ int acc_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int acc_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + 8 * (i >> 2); }

// Tile configuration; must equal Tiles() in backend/cuda/tiles.go (checked at
// load time through the exported *_config constants). Chosen to keep static
// shared memory under 48 KB.
template <int D, int STAGE> struct WTiles {
  static_assert(STAGE == 3 || STAGE == 4, "stage_wmma runs stages 3 and 4");
  static constexpr int WARPS = D == 64 ? 2 : 1;
  static constexpr int BN = D == 64 ? 64 : 32;
};

template <int D, int STAGE>
struct WSmem {
  static constexpr int WARPS = WTiles<D, STAGE>::WARPS, BN = WTiles<D, STAGE>::BN, BM = 16 * WARPS;
  static constexpr int STAGES = STAGE >= 4 ? 3 : 2;
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
  for (int c = tid; c < BM * D / 2; c += THREADS) {
    int rr = (2 * c) / D, dd = (2 * c) % D;
    __nv_fp8x2_storage_t two = 0;
    if (i0 + rr < p.sq) two = *(const __nv_fp8x2_storage_t*)(hd.q + (long long)(i0 + rr) * p.q_row_stride + dd);
    ((__half2_raw*)sm.q16)[c] = __nv_cvt_fp8x2_to_halfraw2(two, __NV_E4M3);
  }
  const int nmax = visible_keys(p, min((int)p.sq - 1, i0 + BM - 1));
  const int tiles = (nmax + BN - 1) / BN;
  // Prologue: fill STAGES-1 slots of the ring.
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, s * BN, sm.k8[s], sm.v8[s]);
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
      if (pre < tiles) load_kv_tile<BN, D, THREADS>(p, hd.k, hd.v, pre * BN, sm.k8[pre % STAGES], sm.v8[pre % STAGES]);
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
        mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffff, mx[k], 1));
        mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffff, mx[k], 2));
        const float m_new = fmaxf(m[k], mx[k]);
        m_use[k] = m_new == NEG_INF ? 0.f : m_new;
        alpha[k] = exp2f(m[k] - m_use[k]);
        m[k] = m_new;
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
        sum[k] += __shfl_xor_sync(0xffffffff, sum[k], 1);
        sum[k] += __shfl_xor_sync(0xffffffff, sum[k], 2);
        l[k] = l[k] * alpha[k] + sum[k];
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
      const bool any = l[k] > 0.f || l[k] != l[k];
      if (row < p.sq)
        hd.out[(long long)row * p.o_row_stride + 16 * dt + acc_col(lane, i)] = any ? of[dt].x[i] * (hd.out_scale / l[k]) : 0.f;
    }
  if (hd.lse && (lane & 3) == 0)
#pragma unroll
    for (int k = 0; k < 2; k++) {
      const int row = w0 + (lane >> 2) + 8 * k;
      const bool any = l[k] > 0.f || l[k] != l[k];
      if (row < p.sq) hd.lse[row] = any ? (m[k] + log2f(l[k])) * LN2 : NEG_INF;
    }
}

// ---------------------------------------------------------------------------
// Entry points: one per (stage, D). Block size and grid come from Tiles() in
// backend/cuda/tiles.go; each kernel's configuration is also exported as a
// device constant that the Go side checks at load time.
// ---------------------------------------------------------------------------
#define CONFIG(name, bm, bn, threads, stages) \
  extern "C" __device__ const int name##_config[4] = {bm, bn, threads, stages};

extern "C" __global__ void __launch_bounds__(128) fp8attn_stage1_d64(const __grid_constant__ Params p) { stage1<64>(p); }
extern "C" __global__ void __launch_bounds__(128) fp8attn_stage1_d128(const __grid_constant__ Params p) { stage1<128>(p); }
CONFIG(fp8attn_stage1_d64, 16, 64, 128, 2)
CONFIG(fp8attn_stage1_d128, 16, 64, 128, 2)

#define S2STAGE(D)                                                                                     \
  extern "C" __global__ void __launch_bounds__(S2<D>::THREADS) fp8attn_stage2_d##D(const __grid_constant__ Params p) { \
    stage2<D>(p);                                                                                      \
  }                                                                                                    \
  extern "C" __device__ const int fp8attn_stage2_d##D##_config[4] = {S2<D>::BM, S2<D>::BN, S2<D>::THREADS, S2<D>::STAGES};
S2STAGE(64) S2STAGE(128)

#define WSTAGE(S, D)                                                                                   \
  extern "C" __global__ void __launch_bounds__(32 * WTiles<D, S>::WARPS)                              \
      fp8attn_stage##S##_d##D(const __grid_constant__ Params p) { stage_wmma<D, S>(p); }               \
  extern "C" __device__ const int fp8attn_stage##S##_d##D##_config[4] = {                              \
      WSmem<D, S>::BM, WSmem<D, S>::BN, 32 * WSmem<D, S>::WARPS, WSmem<D, S>::STAGES};
WSTAGE(3, 64) WSTAGE(3, 128) WSTAGE(4, 64) WSTAGE(4, 128)

// ---------------------------------------------------------------------------
// Stage 5: split-KV warps, FP8 fragments filled directly.
// ---------------------------------------------------------------------------
// Stage 5: KS = 4 (D=64) or 2 (D=128) warps, 2-slot rings. Stage 6: twice
// the warps, 1-slot rings (the shared memory of the rings is what bounds KS).
template <int D, int STAGE> struct S5 {
  static constexpr int KS = (D == 64 ? 4 : 2) * (STAGE >= 6 ? 2 : 1);  // warps (key splits) per block
  static constexpr int BN = 32;                                        // keys per tile
  static constexpr int ROW = D + 16;  // padded tile row (bytes): conflict-free fragment loads
  static constexpr int RING = STAGE >= 6 ? 1 : 2;
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
    uint8_t* kt = ring[warp][slot][0];
    uint8_t* vt = ring[warp][slot][1];
    const int j0 = tile * BN;
#pragma unroll
    for (int c = lane; c < BN * D / 16; c += 32) {
      const int r = c / (D / 16), off = (c % (D / 16)) * 16, j = j0 + r;
      const bool ok = j < p.sk;
      const long long src = (long long)(ok ? j : 0) * p.kv_row_stride + off;
      cp_async16(kt + r * ROW + off, hd.k + src, ok);
      cp_async16(vt + r * ROW + off, hd.v + src, ok);
    }
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
      mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffff, mx[k], 1));
      mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffff, mx[k], 2));
      const float m_new = fmaxf(m[k], mx[k]);
      m_use[k] = m_new == NEG_INF ? 0.f : m_new;
      alpha[k] = exp2f(m[k] - m_use[k]);
      m[k] = m_new;
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
      sum[k] += __shfl_xor_sync(0xffffffff, sum[k], 1);
      sum[k] += __shfl_xor_sync(0xffffffff, sum[k], 2);
      l[k] = l[k] * alpha[k] + sum[k];
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
    const bool any = lsum > 0.f || lsum != lsum;
    const float norm = any ? hd.out_scale / lsum : 0.f;
#pragma unroll
    for (int w = 0; w < KS; w++) mrow[w][r] = f[w] * norm;  // m_w is no longer needed
    if (hd.lse && i0 + r < p.sq) hd.lse[i0 + r] = any ? (ms + log2f(lsum)) * LN2 : NEG_INF;
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
    float* dst = hd.out + (long long)row * p.o_row_stride + d;
    if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
      *reinterpret_cast<float4*>(dst) = o;
    } else {
      dst[0] = o.x, dst[1] = o.y, dst[2] = o.z, dst[3] = o.w;
    }
  }
}

#define SPLIT(S, D)                                                                                    \
  extern "C" __global__ void __launch_bounds__(32 * S5<D, S>::KS)                                      \
      fp8attn_stage##S##_d##D(const __grid_constant__ Params p) { stage5<D, S>(p); }                   \
  extern "C" __device__ const int fp8attn_stage##S##_d##D##_config[4] = {16, S5<D, S>::BN, 32 * S5<D, S>::KS, \
                                                                          S5<D, S>::RING};
SPLIT(5, 64) SPLIT(5, 128) SPLIT(6, 64) SPLIT(6, 128) SPLIT(7, 64) SPLIT(7, 128) SPLIT(8, 64) SPLIT(8, 128)

// check_layout writes, for every lane and accumulator element, 1 where the
// formulas the kernels use (acc_row, acc_col) disagree with the generated,
// hardware-verified table, and also runs a WMMA load to confirm the table
// on the device at hand. bad must hold 32*8 ints.
#include "../../../wmma/include/fp8attn_fragments.h"
extern "C" __global__ void fp8attn_check_layout(int* bad) {
  __shared__ float tile[256];
  int lane = threadIdx.x;
  for (int c = lane; c < 256; c += 32) tile[c] = (float)c;
  __syncwarp();
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
  wmma::load_matrix_sync(f, tile, 16, wmma::mem_row_major);
  for (int i = 0; i < 8; i++) {
    int r = FP8ATTN_WMMA_M16N16K16_ACC_F32[lane][i][0], c = FP8ATTN_WMMA_M16N16K16_ACC_F32[lane][i][1];
    int hw = (int)f.x[i];
    bad[lane * 8 + i] = (r != acc_row(lane, i)) + 2 * (c != acc_col(lane, i)) + 4 * (hw != 16 * r + c);
  }
}
