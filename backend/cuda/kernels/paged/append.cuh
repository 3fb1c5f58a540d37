// paged/append.cuh: fp8attn_paged_append, the append of new keys and values
// to the FP8 cache. Included by paged.cu only, in its order.
#pragma once

// Append. Block (run, KV head, K or V): the run's tokens go to consecutive
// slots of one page, in order, as the cpu backend puts them one by one: a
// token in slot 0 clears the block; the first nonzero token sets the scale;
// a token whose amax exceeds 448·scale grows it and re-encodes the block
// (exact: both scales are powers of two); then the token is encoded,
// x/scale rounded to nearest E4M3, saturating (nothing reaches 448·scale).
// The host launches runs that share a page in separate waves, in order.
constexpr int APPEND_THREADS = 128;

// The cache's layout within each 32-key tile of a (page, KV head) block: the
// tile is stored as it is wanted in shared memory, so that the
// warp-specialized kernel moves it with two bulk copies and the cp.async
// kernel with plain 16-byte copies.
//   Keys: row k (D codes) is key k; its 16-byte chunk c sits at chunk
//   c ^ k_swizzle(k), which puts the eight rows an ldmatrix reads (keys
//   key_of_row(8j..8j+7), below) in distinct bank groups where the row
//   length allows it (D a multiple of 128 bytes or 64: every group; other
//   D: fewer conflicts, or as many as unswizzled).
//   Values: [D][32], row d the 32 keys of dimension d; its chunk c (keys
//   16c..16c+15) at chunk c ^ ((d >> 2) & 1) (v_off: rows d and d+4 of an
//   ldmatrix fall in different bank groups).

// The chunk swizzle of key k in rows of nc 16-byte chunks: the ldmatrix row
// (key_row, common.cuh)
// of the key (mod 8) scaled to the largest power of two (at most 8) that
// divides nc, so that the XOR stays inside the row.
__host__ __device__ __forceinline__ int k_swizzle(int k, int nc) {
  const int s = (nc & -nc) < 8 ? (nc & -nc) : 8;
  return (key_row(k) & 7) * s >> 3;
}

// The byte offset of chunk c of value row d in a tile's values (rows of 32
// bytes).
__host__ __device__ __forceinline__ int v_off(int d, int c) { return d * 32 + 16 * (c ^ ((d >> 2) & 1)); }

// The offsets of key (slot, d) and value (slot, d) in a block of D·P codes.
__device__ __forceinline__ long long k_index(int slot, int d, int D) {
  return (long long)slot * D + 16 * ((d >> 4) ^ k_swizzle(slot & 31, D >> 4)) + (d & 15);
}
__device__ __forceinline__ long long v_index(int slot, int d, int D) {
  return (long long)(slot >> 5) * D * 32 + v_off(d, (slot >> 4) & 1) + (slot & 15);
}

extern "C" __global__ void __launch_bounds__(APPEND_THREADS) fp8attn_paged_append(const AppendParams p) {
  pdl_entry();
  const int* run = p.runs + 5 * blockIdx.x;
  const int b = run[0], t0 = run[1], count = run[2], page = run[3], slot0 = run[4];
  const int h = blockIdx.y, D = p.d, P = p.page_size;
  const bool is_v = blockIdx.z == 1;
  uint8_t* blk = (is_v ? p.v : p.k) + ((long long)page * p.hkv + h) * D * P;
  float* scale_at = (is_v ? p.v_scale : p.k_scale) + (long long)page * p.hkv + h;
  const float* src = (is_v ? p.src_v : p.src_k) + b * p.batch_stride + h * p.head_stride;
  __shared__ float red[APPEND_THREADS / 32];
  const int tid = threadIdx.x;
  float sc = *scale_at;
  for (int u = 0; u < count; u++) {
    const int slot = slot0 + u;
    const float* row = src + (long long)(t0 + u) * p.row_stride;
    if (slot == 0) {  // a new page: forget its previous owner
      for (int e = tid; e < D * P / 4; e += APPEND_THREADS) ((uint32_t*)blk)[e] = 0;
      sc = 0.f;
      __syncthreads();
    }
    float amax = 0.f;
    for (int d = tid; d < D; d += APPEND_THREADS) amax = fmaxf(amax, fabsf(row[d]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if ((tid & 31) == 0) red[tid >> 5] = amax;
    __syncthreads();
    amax = red[0];
#pragma unroll
    for (int w = 1; w < APPEND_THREADS / 32; w++) amax = fmaxf(amax, red[w]);
    if (amax > 0.f) {
      if (sc == 0.f) {
        sc = page_scale(amax);
      } else if (amax > 448.f * sc) {
        const float nw = page_scale(amax), ratio = sc / nw;
        for (int e = tid; e < D * P; e += APPEND_THREADS) blk[e] = float_to_e4m3(e4m3_to_float(blk[e]) * ratio);
        sc = nw;
        __syncthreads();
      }
    }
    for (int d = tid; d < D; d += APPEND_THREADS) {
      const uint8_t c = sc == 0.f ? 0 : float_to_e4m3(row[d] / sc);
      if (is_v) blk[v_index(slot, d, D)] = c;
      else blk[k_index(slot, d, D)] = c;
    }
    __syncthreads();  // red is reused, and a later growth re-reads these codes
  }
  if (tid == 0) *scale_at = sc;
}
