// hopper/one_tile_quantize.cuh: the quantizing one-tile form's quantization
// (quantize_one_tile, quantize_one_tile_v): a cluster's blocks share Q's,
// K's and V's amax and codes. Included by hopper.cuh only, inside namespace
// hopper, in its order.
#pragma once

// qk_col is the first column of float4 j of a Q or K row for thread tid of
// the quantizing form: 16j + 4(tid % 4), so that the four threads of a row
// take 64 contiguous bytes in each load instruction (whole 32-byte sectors;
// with 16(tid % 4) + 4j each instruction took half of every sector it
// touched: 0.05 µs of the mission call).
__device__ __forceinline__ int qk_col(int tid, int j) { return 16 * j + 4 * (tid % 4); }

// HeadScales are a query head's scale and its KV head's, as quant_pack9
// writes them (fp8.ScaleForAmax of each head's amax).
struct HeadScales {
  float q, k, v;
};

// QuantClusterShared is the quantizing form's static shared memory: the
// cluster's blocks' amax of Q and K (parts[rank]: Q, K and two words of
// padding for 16-byte stores) and of V (parts_v[rank]: V and padding),
// their mbarriers, and the block's warps' amax (warp_max[0] Q and [1] K of
// all eight warps, [2] V of the producer's four).
struct QuantClusterShared {
  float4 parts[4], parts_v[4];
  uint64_t amax_full, amax_full_v;
  float warp_max[3][8];
};
__device__ __forceinline__ QuantClusterShared& quant_cluster_shared() {
  __shared__ QuantClusterShared x;
  return x;
}

// cluster_send_tx stores v at x's address in block rank of this cluster
// and completes 16 bytes on that block's mbarrier at bar's address
// (st.async: the store and the transaction count in one message).
__device__ __forceinline__ void cluster_send_tx(float4* x, float4 v, uint64_t* bar, int rank) {
  const uint32_t rx = cluster_map(x, rank), rbar = cluster_map(bar, rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(rx),
               "r"(__float_as_uint(v.x)), "r"(__float_as_uint(v.y)), "r"(__float_as_uint(v.z)), "r"(__float_as_uint(v.w)),
               "r"(rbar)
               : "memory");
}

// producer_sync is a barrier of the producer warpgroup's 128 threads
// alone (named barrier 6; stage 9's turns take 1 to 4).
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 6, 128;\n" ::: "memory"); }

// OneTileSources are a thread's float32 sources in the quantizing form:
// float4 j of its Q row (q[j]) and of its key of K (k[j]), and, in the
// producer warpgroup, float4 j of its V keys (v[4u + j]: unit u, key
// sigma(4vt + j) of its group); 0 where the row or key is past sq or sk
// (the values are zeros).
struct OneTileSources {
  unsigned long long q[4], k[4], v[8];
};

// one_tile_v_unit gives, for thread tid < 128 of the producer and its unit
// u (0, 1), the V key group vg (16 keys), the four columns 4vc .. 4vc+3 and
// the quad vt (keys sigma(4vt .. 4vt+3) of the group) it quantizes.
struct OneTileVUnit {
  int vg, vc, vt;
};
__device__ __forceinline__ OneTileVUnit one_tile_v_unit(int tid, int u) { return {tid / 64 + 2 * u, tid / 4 % 16, tid % 4}; }

// one_tile_v_sources sets x.v: thread tid's V sources in block r of KV
// head kvh of batch b (tid < 128: the two units of one_tile_v_unit; 0
// elsewhere and past sk). Unit u's key sigma(4vt + j) is key 16vg + 2vt +
// sigma(j) with vg = tid/64 + 2u, so the eight keys are the first one
// plus 0, 1, 8, 9, 32, 33, 40 and 41: one address computed, the others
// offsets from it, selected without branches (a branch and a parameter
// read a key measured slower: docs/design/quantize.md).
template <int D>
__device__ __forceinline__ void one_tile_v_sources(const Params& p, int b, int kvh, int r, int tid, OneTileSources& x) {
  constexpr int R = Geometry<D>::ONE_BM;
  const OneTileVUnit u = one_tile_v_unit(tid, 0);
  const int k0 = R * r + 16 * u.vg + 2 * u.vt, sk = (int)p.sk;
  const long long rs = p.kv_row_stride * (long long)sizeof(float);
  const unsigned long long a0 =
      (unsigned long long)((const float*)p.v + b * p.kv_batch_stride + kvh * p.kv_head_stride + 4 * u.vc) + (unsigned long long)(k0 * rs);
  const bool producer = tid < 128;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    int dk = 32 * (i / 4) + sigma(i % 4);
    x.v[i] = producer & (k0 + dk < sk) ? a0 + (unsigned long long)(dk * rs) : 0ull;
    asm volatile("" : "+l"(x.v[i]));
  }
}

// one_tile_sources is thread tid's sources in block r (query rows i0 ..
// i0+63, keys 64r .. 64r+63) of a query head h of batch b, KV head kvh:
// Q and K, row tid/4 of the block's, columns qk_col(tid, j); V (tid <
// 128), one_tile_v_sources. Kernel parameters only: it runs before
// pdl_wait, under the previous call, so that the loads issue back to back
// once the wait returns (the empty asm keeps ptxas from sinking the
// arithmetic past it: 0.15 µs of the mission call).
template <int D>
__device__ __forceinline__ OneTileSources one_tile_sources(const Params& p, int b, int h, int kvh, int i0, int r, int tid) {
  constexpr int R = Geometry<D>::ONE_BM;
  const int row = tid / 4, qrow = i0 + row, key = R * r + row;
  const float* q = (const float*)p.q + b * p.q_batch_stride + h * p.q_head_stride;
  const float* k = (const float*)p.k + b * p.kv_batch_stride + kvh * p.kv_head_stride;
  OneTileSources x;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    x.q[j] = qrow < p.sq ? (unsigned long long)(q + qrow * p.q_row_stride + qk_col(tid, j)) : 0ull;
    x.k[j] = key < p.sk ? (unsigned long long)(k + key * p.kv_row_stride + qk_col(tid, j)) : 0ull;
    asm volatile("" : "+l"(x.q[j]), "+l"(x.k[j]));
  }
  one_tile_v_sources<D>(p, b, kvh, r, tid, x);
  return x;
}

// one_tile_amax4 is the quantizing form's amax4 (non-finite values not
// counted; mutants/s9-amax-counts-nonfinite.sed counts them).
__device__ __forceinline__ float one_tile_amax4(float m, float4 x) {
  return amax4(m, x);
}

// one_tile_load is the float4 at a (zeros where a is 0).
__device__ __forceinline__ float4 one_tile_load(unsigned long long a) {
  return a ? *(const float4*)a : make_float4(0.f, 0.f, 0.f, 0.f);
}

// quantize_one_tile is the quantizing one-tile form's first part
// (fp8attn_stage9qo_d64, stage9 with QC), run by all ONE_THREADS threads
// of block r of a cluster of ONE_CLUSTER (one query head), after pdl_wait:
//   * it loads float32 query rows i0 .. i0+63 and keys 64r .. 64r+63 of K
//     (zeros past sq and sk) into registers, eight float4 a thread from
//     the addresses src (one_tile_sources, computed before pdl_wait), and
//     the producer warpgroup, once those have arrived, the same keys of V
//     into xv (eight float4 a thread, for quantize_one_tile_v);
//   * it finds the amax of Q and K (amax_add, quant_pack9's rule); the
//     blocks' amax are exchanged through distributed shared memory (sent
//     into every block's parts, completing on its amax_full): the head's
//     amax, scale and Encoder, as quant_pack9 has them;
//   * it encodes its rows of Q into its own s_q (the Q image block,
//     negated where the softmax scale is negative) and its keys of K into
//     s_k at their image offsets (the tiled kernel's K image: the 64 keys
//     of block r are bytes 4096r .. +4095 of it);
//   * its K share is copied into the other blocks' s_k (bulk copies
//     between shared memories, on their k_full[0], which expects the other
//     blocks' bytes from the set-up).
// V takes the producer warpgroup alone, after this and beside the
// consumer's Q·Kᵀ and softmax (quantize_one_tile_v): P·V needs it only
// after them. The codes are bit for bit quant_pack9's (the same loads,
// amax, Encoder and sign), so the call is bit for bit Quantize then
// AttentionOn. Returns the Q and K scales (v is 0: one_tile_v_scale).
template <int D>
__device__ __forceinline__ HeadScales quantize_one_tile(const FusedQuantParams& f, const OneTileSources& src, int i0, uint8_t* s_q,
                                                        uint8_t* s_k, uint64_t* k_full, float4 (&xv)[8]) {
  using G = Geometry<D>;
  constexpr int NC = G::ONE_CLUSTER, R = G::ONE_BM, SHARE = R * G::DK, NW = HopperTiles<D>::ONE_THREADS / 32;
  static_assert(D == 64 && G::DK == D && G::WK == R && NC * R == 2 * G::BN && NC <= 4 && NW == 8,
                "the quantizing one-tile form: D 64, a block's keys one 64-byte row of V's sub-tile, 16 bytes of codes a thread");
  QuantClusterShared& qs = quant_cluster_shared();
  const Params& p = f.p;
  const int r = blockIdx.x, tid = threadIdx.x, sq = (int)p.sq;
  QP_STAMP(tid == 0, 0, 1);
  // Q and K: row `row` of the block's, float4 j at column qk_col(tid, j).
  const int row = tid / 4, qrow = i0 + row, key = R * r + row;
  float4 xq[4], xk[4];
#pragma unroll
  for (int j = 0; j < 4; j++) xq[j] = one_tile_load(src.q[j]), xk[j] = one_tile_load(src.k[j]);
  float m[2] = {0.f, 0.f};
  uint32_t top = 0;  // the largest magnitude's bits: non-finite values where >= 0x7F800000
#pragma unroll
  for (int j = 0; j < 4; j++) {
    m[0] = one_tile_amax4(m[0], xq[j]), m[1] = one_tile_amax4(m[1], xk[j]);
    top = top4(top4(top, xq[j]), xk[j]);
  }
  // top here, where the loads' wait hides its operations (ptxas would sink
  // them past the amax exchange, onto the path to the codes).
  asm volatile("" : "+r"(top));
  QP_STAMP(tid == 0 && m[0] >= 0.f, 0, 2);  // (m: after the loads)
  // The block's amax (quant_pack9's reduction), then every block's into
  // every block's parts.
#pragma unroll
  for (int a = 0; a < 2; a++) {
    m[a] = warp_amax(m[a]);
    if (tid % 32 == 0) qs.warp_max[a][tid / 32] = m[a];
  }
  __syncthreads();
  // V's loads once Q's and K's have arrived, so that they do not share the
  // SM's bandwidth with them (0.05 µs of the mission call).
  if (tid < 128) {
#pragma unroll
    for (int i = 0; i < 8; i++) xv[i] = one_tile_load(src.v[i]);
  }
  if (tid < 32) {
#pragma unroll
    for (int a = 0; a < 2; a++) m[a] = warp_amax(tid < NW ? qs.warp_max[a][tid] : 0.f);
    QP_STAMP(tid == 0, 0, 3);
    cluster_wait();  // every block of the cluster has started (arrived at the set-up)
    if (tid < NC) cluster_send_tx(&qs.parts[r], make_float4(m[0], m[1], 0.f, 0.f), &qs.amax_full, tid);
  } else {
    cluster_wait();
  }
  // Warp 0 has sent before any warp spins on the barrier: a spinning warp
  // must not keep warp 0 from its sends (compute-sanitizer's racecheck,
  // which schedules warps its own way, hung without this).
  __syncthreads();
  mbar_wait(&qs.amax_full, 0);  // every block's amax is in parts
  float am[2] = {0.f, 0.f};
#pragma unroll
  for (int c = 0; c < NC; c++) {
    const float4 pc = qs.parts[c];
    am[0] = fmaxf(am[0], pc.x), am[1] = fmaxf(am[1], pc.y);
  }
  QP_STAMP(tid == 0, 0, 4);
  const Encoder eq(scale_for_amax(am[0])), ek(scale_for_amax(am[1]));
  uint4 cq, ck;
  // Where the thread's values are finite and the scales take Encoder's
  // fast path, straight-line code (one branch a thread, not one a float4:
  // 0.7 µs of the mission call, docs/design/quantize.md).
  if (eq.fast && ek.fast && top < 0x7F800000u) {
    cq = make_uint4(eq.finite4(xq[0]), eq.finite4(xq[1]), eq.finite4(xq[2]), eq.finite4(xq[3]));
    ck = make_uint4(ek.finite4(xk[0]), ek.finite4(xk[1]), ek.finite4(xk[2]), ek.finite4(xk[3]));
  } else {
    cq = make_uint4(eq(xq[0]), eq(xq[1]), eq(xq[2]), eq(xq[3]));
    ck = make_uint4(ek(xk[0]), ek(xk[1]), ek(xk[2]), ek(xk[3]));
  }
  {  // word j: the codes of columns qk_col(j) .. +3
    const uint4 nq = qrow < sq ? negate_if(cq, f.scale < 0.0) : make_uint4(0, 0, 0, 0);
    const uint32_t wq[4] = {nq.x, nq.y, nq.z, nq.w}, wk[4] = {ck.x, ck.y, ck.z, ck.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      *(uint32_t*)(s_q + swizzle<G::WK>(row * G::WK + qk_col(tid, j))) = wq[j];
      *(uint32_t*)(s_k + qk_image_offset<D, G::BN>(key, qk_col(tid, j))) = wk[j];
    }
  }
  QP_STAMP(tid == 0, 1, 5);
  // The tensor cores and the copies read shared memory through the async proxy.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  QP_STAMP(tid == 0, 0, 5);
  // The K copies, from lanes j < NC - 1 of the consumer warpgroup's first
  // warp: this block's share to the (j + 1)-th block after it.
  const int j = tid - HopperTiles<D>::ONE_THREADS / 2;
  if (j >= 0 && j < NC - 1) {
    bulk_copy_peer(s_k + r * SHARE, s_k + r * SHARE, SHARE, k_full, (r + j + 1) % NC);
    QP_STAMP(j == 0, 0, 6);
  }
  return HeadScales{eq.s, ek.s, 0.f};
}

// quantize_one_tile_v is the quantizing form's V, run by the producer
// warpgroup (tid < 128) after quantize_one_tile, with the values it loaded
// (xv) and at most 96 registers a thread (the consumer holds the rest):
// the producer's amax of its V keys, the blocks' V amax exchanged as Q's
// and K's are (parts_v, amax_full_v), and its keys of V encoded into
// s_v's sub-tile r: D rows (one a head-dim column) of the 64 keys, 64-byte
// rows swizzled as Q and K are, keys permuted by sigma in each 16-key
// group as in the V image (a thread holds keys sigma(4t .. 4t+3) of a
// group for four columns, so byte permutes of its codes give word t of
// each column's 16 bytes); then the share is copied into the other
// blocks' s_v (on their v_full[0]), and this block's v_full[0] gets its
// second arrival (the consumer's P·V reads this share too). P·V takes
// V's sub-tiles with 64-byte descriptors, the same keys in the same k
// steps as the V image.
template <int D>
__device__ __forceinline__ void quantize_one_tile_v(const float4 (&xv)[8], uint8_t* s_v, uint64_t* v_full) {
  using G = Geometry<D>;
  constexpr int NC = G::ONE_CLUSTER, R = G::ONE_BM, SHARE = R * G::DK;
  QuantClusterShared& qs = quant_cluster_shared();
  const int r = blockIdx.x, tid = threadIdx.x;
  float m = 0.f;
  uint32_t top = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) m = one_tile_amax4(m, xv[i]), top = top4(top, xv[i]);
  m = warp_amax(m);
  if (tid % 32 == 0) qs.warp_max[2][tid / 32] = m;
  producer_sync();
  if (tid < 32) {
    m = warp_amax(tid < 4 ? qs.warp_max[2][tid] : 0.f);
    if (tid < NC) cluster_send_tx(&qs.parts_v[r], make_float4(m, 0.f, 0.f, 0.f), &qs.amax_full_v, tid);
  }
  producer_sync();  // (warp 0 has sent before any warp spins: as in quantize_one_tile)
  mbar_wait(&qs.amax_full_v, 0);
  float am = 0.f;
#pragma unroll
  for (int c = 0; c < NC; c++) am = fmaxf(am, qs.parts_v[c].x);
  const Encoder ev(scale_for_amax(am));
  uint32_t w[8];  // w[4u + j]: the codes of unit u's key sigma(4vt + j), its four columns
  if (ev.fast && top < 0x7F800000u) {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = ev.finite4(xv[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = ev(xv[i]);
  }
  uint8_t* sub = s_v + r * SHARE;
#pragma unroll
  for (int u = 0; u < 2; u++) {
    const OneTileVUnit vu = one_tile_v_unit(tid, u);
#pragma unroll
    for (int e = 0; e < 4; e++)  // column 4vc + e: byte e of the unit's w
      *(uint32_t*)(sub + swizzle<R>((4 * vu.vc + e) * R + 16 * vu.vg + 4 * vu.vt)) =
          byte_column(w[4 * u], w[4 * u + 1], w[4 * u + 2], w[4 * u + 3], e);
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  producer_sync();
  if (tid < NC - 1) bulk_copy_peer(sub, sub, SHARE, v_full, (r + tid + 1) % NC);
  // The block's own share is in s_v: v_full's second arrival (after the
  // producer's barrier, so every producer thread's stores and proxy fence
  // come before it). Without it the consumer's P·V could read the sub-tile
  // before it is written: compute-sanitizer's racecheck, which schedules
  // warps its own way, found that).
  if (tid == NC - 1) mbar_arrive(v_full);
}

// one_tile_v_scale is the head's V scale in the quantizing form, as
// quantize_one_tile_v found it (the consumer's descale for the epilogue):
// every block's V amax, once they are all in parts_v.
template <int D>
__device__ __forceinline__ float one_tile_v_scale() {
  QuantClusterShared& qs = quant_cluster_shared();
  mbar_wait(&qs.amax_full_v, 0);
  float am = 0.f;
#pragma unroll
  for (int c = 0; c < Geometry<D>::ONE_CLUSTER; c++) am = fmaxf(am, qs.parts_v[c].x);
  return scale_for_amax(am);
}
