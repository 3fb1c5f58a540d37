// paged/prefill_inputs.cuh: fp8attn_paged_prefill_inputs, the inputs of a
// chunk of many new queries that runs on the prefill kernels, which read
// plain FP8 tensors: the queries quantized, and the cached keys and values
// of a batch of sequences gathered into rows of D codes (BHSD or BSHD by
// the strides), each sequence's from key 0, the tensors as long as the
// longest. One launch does both, so that the queries'
// quantization overlaps the gather's traffic. Included by paged.cu only, in
// its order, after quant.cuh (the query encode is Memory.Quantize's).
#pragma once

constexpr int PREFILL_THREADS = 256;

// rescale16 re-encodes 16 codes at a scale r times theirs (r a power of two
// at most 1): each value times r, rounded to nearest E4M3, as the append
// re-encodes a block whose scale grows.
__device__ __forceinline__ uint4 rescale16(uint4 x, float r) {
  uint8_t* c = (uint8_t*)&x;
#pragma unroll
  for (int i = 0; i < 16; i++) c[i] = float_to_e4m3(e4m3_to_float(c[i]) * r);
  return x;
}

// The queries: blocks 0 .. B·Hq·q_chunks-1, each a chunk of q_rows rows of
// one (sequence, head), bit for bit fp8attn_quant_amax and
// fp8attn_quant_encode (fp8.QuantizeE4M3 per head) in one pass: the chunk's
// largest finite |x| goes into the head's amax word, and once every chunk
// of the head has arrived each encodes its rows with the head's scale. A
// block's chunk is the ticket it draws when it starts, not its index, so a
// chunk waits only for chunks that have started or will start next: with
// q_chunks at most the blocks the GPU holds at once (the host bounds it by
// the SMs), every wait ends. The head's last chunk writes its scale and
// clears its words; the last query block clears the ticket.
__device__ __forceinline__ void prefill_quantize(const PrefillParams& p) {
  __shared__ unsigned ticket;
  __shared__ float warp_max[PREFILL_THREADS / 32];
  __shared__ float scale;
  const int tid = threadIdx.x, D = p.d;
  unsigned* const words = p.words;
  if (tid == 0) ticket = atomicAdd(&words[0], 1u);
  __syncthreads();
  const int head = ticket / p.q_chunks, chunk = ticket - head * p.q_chunks;
  const int b = head / p.hq, h = head - b * p.hq;
  const int r0 = chunk * p.q_rows, r1 = min(r0 + p.q_rows, p.sq);
  const long long base = b * p.q_batch_stride + h * p.q_head_stride;
  const int groups = D / 4, n = (r1 - r0) * groups;  // the chunk's float4s (D is a multiple of 16)
  unsigned* const hw = words + 2 + 3 * head;        // the head's amax, chunks arrived, chunks encoded
  float m = 0.f;
  for (int e = tid; e < n; e += PREFILL_THREADS) {
    const int r = r0 + e / groups, c = 4 * (e % groups);
    const float4 x = *(const float4*)(p.q + base + r * p.q_row_stride + c);
    m = amax_add(amax_add(amax_add(amax_add(m, x.x), x.y), x.z), x.w);
  }
  m = block_max(m, warp_max);  // thread 0's is the block's
  if (tid == 0) {
    if (m > 0.f) atomicMax(&hw[0], __float_as_uint(m));
    __threadfence();
    atomicAdd(&hw[1], 1u);
    while (*(volatile unsigned*)&hw[1] < (unsigned)p.q_chunks) {
    }
    __threadfence();
    scale = scale_for_amax(__uint_as_float(*(volatile unsigned*)&hw[0]));
  }
  __syncthreads();
  const float s = scale;
  for (int e = tid; e < n; e += PREFILL_THREADS) {
    const int r = r0 + e / groups, c = 4 * (e % groups);
    const long long o = base + r * p.q_row_stride + c;
    *(uint32_t*)(p.q_codes + o) = encode4(*(const float4*)(p.q + o), s);
  }
  __syncthreads();
  if (tid == 0) {
    if (atomicAdd(&hw[2], 1u) == (unsigned)p.q_chunks - 1) {  // every chunk of the head is past its wait
      p.q_scales[head] = s;
      hw[0] = hw[1] = hw[2] = 0u;
    }
    if (atomicAdd(&words[1], 1u) == (unsigned)(p.b * p.hq * p.q_chunks) - 1) words[0] = words[1] = 0u;
  }
}

// The cache: the blocks after the queries', one a (32-key tile, KV head,
// sequence). Each (sequence, KV head) gets one scale for its keys and one
// for its values, the largest of its pages' (1 where every page holds
// zeros), and every page's codes are re-encoded at it: exact where the
// page's scale is that one, otherwise rounded as the append rounds a block
// whose scale grows (values below 2^-6 of the new scale lose bits, as in a
// tensor quantized with one scale). A block issues its tile's loads first
// (keys a 16-byte chunk a thread, unswizzled by k_swizzle; the [D][32]
// values into shared memory), then reads the sequence's page scales, then
// writes its rows: values a warp a 16-byte column chunk of 32 keys, out of
// v_off's layout (no bank conflicts). Where the sequence is shorter than
// the tensors' sk keys (a batch of different lengths), its slots from its
// length up to the next multiple of 256 (the largest key tile the prefill
// kernels load) are written zeros, so that the tile holding its last key
// holds finite codes past it, and the slots past those are not written.
__device__ __forceinline__ void prefill_gather(const PrefillParams& p, int g) {
  __shared__ float red[2][PREFILL_THREADS / 32];
  __shared__ __align__(16) uint8_t tile[256 * 32];  // one tile's values, D <= 256
  const int tid = threadIdx.x, D = p.d, P = p.page_size, nc = D >> 4;
  const int t = g % p.tiles, h = (g / p.tiles) % p.hkv, b = g / (p.tiles * p.hkv);
  const int n = p.seq_lens[b], first = 32 * t;
  const int zeros = min(p.sk, (n + 255) / 256 * 256) - first;  // slots from first on to write, zeros past n
  if (zeros <= 0) return;
  const long long out_at = b * p.batch_stride + h * p.head_stride + (long long)first * p.row_stride;
  if (first >= n) {
    for (int e = tid; e < 32 * nc; e += PREFILL_THREADS) {
      const int j = e / nc, c = e - j * nc;
      if (j < zeros) {
        *(uint4*)(p.out_k + out_at + (long long)j * p.row_stride + 16 * c) = make_uint4(0, 0, 0, 0);
        *(uint4*)(p.out_v + out_at + (long long)j * p.row_stride + 16 * c) = make_uint4(0, 0, 0, 0);
      }
    }
    return;
  }
  const int* pages = p.block_table + (long long)b * p.pages_per_seq;
  const int pg = first / P;
  const long long at = (long long)pages[pg] * p.hkv + h;
  const long long blk = at * D * P + (long long)(first - pg * P) * D;  // the tile in its page's block
  uint4 kx[2];  // 32·nc chunks, at most 512 (D 256)
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int e = tid + i * PREFILL_THREADS, j = e / nc, c = e - j * nc;
    if (e < 32 * nc) kx[i] = *(const uint4*)(p.k + blk + (long long)j * D + 16 * (c ^ k_swizzle(j, nc)));
  }
  for (int e = tid; e < 2 * D; e += PREFILL_THREADS) ((uint4*)tile)[e] = ((const uint4*)(p.v + blk))[e];
  const int np = (n + P - 1) / P;
  float mk = 0.f, mv = 0.f;
  for (int i = tid; i < np; i += PREFILL_THREADS) {
    const long long a = (long long)pages[i] * p.hkv + h;
    mk = fmaxf(mk, p.k_scale[a]);
    mv = fmaxf(mv, p.v_scale[a]);
  }
  mk = group_max<32>(mk);
  mv = group_max<32>(mv);
  if ((tid & 31) == 0) red[0][tid >> 5] = mk, red[1][tid >> 5] = mv;
  __syncthreads();  // (and the tile's values are in)
#pragma unroll
  for (int w = 0; w < PREFILL_THREADS / 32; w++) mk = fmaxf(mk, red[0][w]), mv = fmaxf(mv, red[1][w]);
  const float sk = mk > 0.f ? mk : 1.f, sv = mv > 0.f ? mv : 1.f;
  if (t == 0 && tid == 0) {
    p.out_k_scale[b * p.hkv + h] = sk;
    p.out_v_scale[b * p.hkv + h] = sv;
  }
  const float rk = p.k_scale[at] / sk, rv = p.v_scale[at] / sv;  // 0 for a block of zeros: its codes stay 0
  const int rows = min(32, n - first);
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int e = tid + i * PREFILL_THREADS, j = e / nc, c = e - j * nc;
    if (e < 32 * nc && j < zeros) {
      uint4 x = make_uint4(0, 0, 0, 0);
      if (j < rows) {
        x = kx[i];
        if (rk != 1.f) x = rescale16(x, rk);
      }
      *(uint4*)(p.out_k + out_at + (long long)j * p.row_stride + 16 * c) = x;
    }
  }
  for (int e = tid; e < 32 * nc; e += PREFILL_THREADS) {
    const int j = e & 31, c = e >> 5;
    if (j < zeros) {
      uint4 x = make_uint4(0, 0, 0, 0);
      if (j < rows) {
        uint8_t* xb = (uint8_t*)&x;
#pragma unroll
        for (int i = 0; i < 16; i++) xb[i] = tile[v_off(16 * c + i, j >> 4) + (j & 15)];
        if (rv != 1.f) x = rescale16(x, rv);
      }
      *(uint4*)(p.out_v + out_at + (long long)j * p.row_stride + 16 * c) = x;
    }
  }
}

extern "C" __global__ void __launch_bounds__(PREFILL_THREADS) fp8attn_paged_prefill_inputs(const PrefillParams p) {
  pdl_entry();
  const int qblocks = p.b * p.hq * p.q_chunks;
  if ((int)blockIdx.x < qblocks) {
    prefill_quantize(p);
  } else {
    prefill_gather(p, blockIdx.x - qblocks);
  }
}
