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

// vi_group is the 16 codes of keys 0..15 (x, in key order) in a V image's
// order, sigma's (common.cuh): byte q holds key sigma(q).
__device__ __forceinline__ uint4 vi_group(uint4 x) {
  return make_uint4(__byte_perm(x.x, x.z, 0x5410), __byte_perm(x.x, x.z, 0x7632), __byte_perm(x.y, x.w, 0x5410),
                    __byte_perm(x.y, x.w, 0x7632));
}

// The cache: the blocks after the queries', one a run of PREFILL_TILES
// 32-key tiles of one (KV head, sequence). Each (sequence, KV head) gets
// one scale for its keys and one for its values, the largest of its pages'
// (1 where every page holds zeros), and every page's codes are re-encoded
// at it: exact where the page's scale is that one, otherwise rounded as the
// append rounds a block whose scale grows (values below 2^-6 of the new
// scale lose bits, as in a tensor quantized with one scale). A block issues
// its first tile's loads (keys one or two 16-byte chunks a thread,
// unswizzled by k_swizzle; values as below), then reads the sequence's page
// scales, once for its run, while its first threads read its tiles' pages
// and their scales; then it writes its tiles' rows in turn, each tile's
// loads issued before the rows of the tile before go out (a run of a few
// tiles a block spends the block's set-up, its divisions and the scales'
// maximum, on all of them). Keys go to out_k's rows. Values
// go either to out_v's rows (v_image null): a tile's [D][32] codes through
// shared memory (tile), a warp a 16-byte column chunk of 32 keys, out of
// v_off's layout (no bank conflicts); or straight into stage 9's V image
// (v_image: pack_v's layout, tiles of vi_tile keys, a power of two, vi_rows
// rows of them a tile, those from d on zeros, swizzled as swizzle<vi_tile>),
// a thread a 16-key group of one row d, which the page holds as one 16-byte
// chunk in key order (vi_group puts it in the image's). Where the sequence
// is shorter than the tensors' sk keys (a batch of different lengths), its
// slots from its length up to the next multiple of 256 (the largest key
// tile the prefill kernels load) are written zeros, so that the tile
// holding its last key holds finite codes past it, and the slots past
// those are not written; the image's last tile is written whole (zeros
// past sk). NC is D's 16-byte chunks where the entry point knows them (the
// common head dims: its indexing by shifts), 0 for p.d's.
constexpr int PREFILL_TILES = 2;

// PrefillRun is what a gather block's threads share: the block-wide
// maxima, and per tile of its run where its page's codes are and the
// page's scales (read by the first threads while the others read the
// sequence's page scales).
struct PrefillRun {
  float red[2][PREFILL_THREADS / 32];
  long long blk[PREFILL_TILES];  // the tile in the pool
  float ks[PREFILL_TILES], vs[PREFILL_TILES];
};

// PrefillTile is one 32-key tile of a gather block: its first key, its
// keys of the sequence (rows, 0 past its length), and where its codes are
// in the pool.
struct PrefillTile {
  int first, rows;
  long long blk;
};

// prefill_chunks is a thread's 16-byte chunks of a tile's keys, and as
// many of its values (32 keys of D <= 256 codes: at most 512 chunks).
template <int NC> __host__ __device__ constexpr int prefill_chunks() {
  return NC ? (32 * NC + PREFILL_THREADS - 1) / PREFILL_THREADS : 2;
}

// prefill_load loads a thread's chunks of tile x (none past the sequence):
// keys unswizzled by k_swizzle; values, where they go to the image, a
// 16-key group of row d a thread.
template <int NC>
__device__ __forceinline__ void prefill_load(const PrefillParams& p, const PrefillTile& x, bool image, uint4* kx, uint4* vx) {
  const int tid = threadIdx.x, nc = NC ? NC : p.d >> 4, D = 16 * nc;
  if (x.rows <= 0) return;
#pragma unroll
  for (int i = 0; i < prefill_chunks<NC>(); i++) {
    const int e = tid + i * PREFILL_THREADS, j = e / nc, c = e - j * nc;
    if (e < 32 * nc) kx[i] = *(const uint4*)(p.k + x.blk + (long long)j * D + 16 * (c ^ k_swizzle(j, nc)));
  }
  if (image) {
#pragma unroll
    for (int i = 0; i < prefill_chunks<NC>(); i++) {
      const int e = tid + i * PREFILL_THREADS, d = e >> 1;
      if (d < D) vx[i] = *(const uint4*)(p.v + x.blk + v_off(d, e & 1));
    }
  }
}

template <int NC>
__device__ __forceinline__ void prefill_gather(const PrefillParams& p, int g, uint8_t* tile, PrefillRun& run) {
  constexpr int KC = prefill_chunks<NC>();
  const int tid = threadIdx.x, P = p.page_size, nc = NC ? NC : p.d >> 4, D = 16 * nc;
  const int runs = (p.tiles + PREFILL_TILES - 1) / PREFILL_TILES;  // a (sequence, KV head)'s blocks
  const int head = g / runs, b = head / p.hkv, h = head - b * p.hkv;
  const int t0 = (g - head * runs) * PREFILL_TILES, t1 = min(t0 + PREFILL_TILES, p.tiles);
  if (b >= p.b) return;
  const int n = p.seq_lens[b], padded = (n + 255) / 256 * 256;
  const bool image = p.v_image != nullptr;
  const int vshift = image ? __ffs(p.vi_tile) - 1 : 0, vt = 1 << vshift, rows_i = image ? p.vi_rows : 0;
  const int vtiles = (p.sk + vt - 1) >> vshift;
  const int kend = min(p.sk, padded);                            // key slots to write
  const int vend = min(image ? vtiles << vshift : p.sk, padded);  // value slots
  if (kend <= 32 * t0 && vend <= 32 * t0) return;
  const int* pages = p.block_table + (long long)b * p.pages_per_seq;
  const int pshift = (P & (P - 1)) == 0 ? __ffs(P) - 1 : -1;  // P's log2 where it is a power of two
  // tile i of the run: its page and its place in the pool
  auto locate = [&](int i, long long& at) {
    const int first = 32 * (t0 + i), pg = pshift >= 0 ? first >> pshift : first / P;
    at = (long long)pages[pg] * p.hkv + h;
    return at * D * P + (long long)(first - pg * P) * D;
  };
  const auto tile_at = [&](int i, long long blk) {
    PrefillTile x;
    x.first = 32 * (t0 + i);
    x.rows = max(0, min(32, n - x.first));
    x.blk = blk;
    return x;
  };
  uint4 kx[KC], vx[KC];
  PrefillTile x = tile_at(0, 0);
  float sk = 1.f, sv = 1.f;
  if (x.rows > 0) {
    long long at;
    x.blk = locate(0, at);
    prefill_load<NC>(p, x, image, kx, vx);
    if (tid < t1 - t0 && 32 * (t0 + tid) < n) {
      run.blk[tid] = tid ? locate(tid, at) : x.blk;
      run.ks[tid] = p.k_scale[at];
      run.vs[tid] = p.v_scale[at];
    }
    const int np = (n + P - 1) / P;
    float mk = 0.f, mv = 0.f;
    for (int i = tid; i < np; i += PREFILL_THREADS) {
      const long long a = (long long)pages[i] * p.hkv + h;
      mk = fmaxf(mk, p.k_scale[a]);
      mv = fmaxf(mv, p.v_scale[a]);
    }
    mk = group_max<32>(mk);
    mv = group_max<32>(mv);
    if ((tid & 31) == 0) run.red[0][tid >> 5] = mk, run.red[1][tid >> 5] = mv;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < PREFILL_THREADS / 32; w++) mk = fmaxf(mk, run.red[0][w]), mv = fmaxf(mv, run.red[1][w]);
    sk = mk > 0.f ? mk : 1.f, sv = mv > 0.f ? mv : 1.f;
    if (t0 == 0 && tid == 0) {
      p.out_k_scale[b * p.hkv + h] = sk;
      p.out_v_scale[b * p.hkv + h] = sv;
    }
  }
#pragma unroll 1
  for (int i = 0; i < t1 - t0; i++) {
    const int first = x.first, rows = x.rows, kz = kend - first, vz = vend - first;
    if (kz <= 0 && vz <= 0) break;
    // The next tile's loads go out before this tile's rows.
    PrefillTile nx = tile_at(i + 1, 0);
    uint4 nkx[KC], nvx[KC];
    if (i + 1 < t1 - t0 && nx.rows > 0) {
      nx.blk = run.blk[i + 1];
      prefill_load<NC>(p, nx, image, nkx, nvx);
    }
    float rk = 0.f, rv = 0.f;
    if (rows > 0) rk = run.ks[i] / sk, rv = run.vs[i] / sv;  // 0 for a block of zeros: its codes stay 0
    const long long out_at = b * p.batch_stride + h * p.head_stride + (long long)first * p.row_stride;
#pragma unroll
    for (int c0 = 0; c0 < KC; c0++) {
      const int e = tid + c0 * PREFILL_THREADS, j = e / nc, c = e - j * nc;
      if (e < 32 * nc && j < kz) {
        uint4 y = make_uint4(0, 0, 0, 0);
        if (j < rows) {
          y = kx[c0];
          if (rk != 1.f) y = rescale16(y, rk);
        }
        *(uint4*)(p.out_k + out_at + (long long)j * p.row_stride + 16 * c) = y;
      }
    }
    if (image) {
      uint8_t* const img = p.v_image + ((long long)head * vtiles + (first >> vshift)) * rows_i * vt;
      const int g0 = (first & (vt - 1)) >> 4;  // the tile's first 16-key group in its image tile
#pragma unroll
      for (int c0 = 0; c0 < 2; c0++) {  // rows_i <= 256: two 16-key groups a row
        const int e = tid + c0 * PREFILL_THREADS, d = e >> 1, key0 = 16 * (e & 1);
        if (d < rows_i && key0 < vz) {
          uint4 y = make_uint4(0, 0, 0, 0);
          if (d < D && key0 < rows) {
            y = vx[c0 < KC ? c0 : 0];
            if (key0 + 16 > rows) {  // the sequence's last keys: zeros past them
              uint8_t* yb = (uint8_t*)&y;
#pragma unroll
              for (int q = 0; q < 16; q++)
                if (key0 + q >= rows) yb[q] = 0;
            }
            if (rv != 1.f) y = rescale16(y, rv);
            y = vi_group(y);
          }
          const int o = d * vt + 16 * (g0 + (e & 1));
          *(uint4*)(img + (o ^ (((o >> 7) & ((vt >> 4) - 1)) << 4))) = y;  // swizzle<vi_tile> (hopper/wgmma.cuh)
        }
      }
    } else {
      __syncthreads();  // the tile before is read
      if (rows > 0)
        for (int e = tid; e < 2 * D; e += PREFILL_THREADS) ((uint4*)tile)[e] = ((const uint4*)(p.v + x.blk))[e];
      __syncthreads();
      for (int e = tid; e < 32 * nc; e += PREFILL_THREADS) {
        const int j = e & 31, c = e >> 5;
        if (j < vz) {
          uint4 y = make_uint4(0, 0, 0, 0);
          if (j < rows) {
            uint8_t* yb = (uint8_t*)&y;
#pragma unroll
            for (int q = 0; q < 16; q++) yb[q] = tile[v_off(16 * c + q, j >> 4) + (j & 15)];
            if (rv != 1.f) y = rescale16(y, rv);
          }
          *(uint4*)(p.out_v + out_at + (long long)j * p.row_stride + 16 * c) = y;
        }
      }
    }
    x = nx;
#pragma unroll
    for (int c0 = 0; c0 < KC; c0++) kx[c0] = nkx[c0], vx[c0] = nvx[c0];
  }
}

// At most 64 registers a thread: PREFILL_BLOCKS_PER_SM blocks an SM, as the
// query chunks' plan and forward progress assume (prefillChunkRows).
constexpr int PREFILL_BLOCKS_PER_SM = 4;

// The geometry the host's grid assumes (prefillThreads).
extern "C" __device__ const int fp8attn_paged_prefill_inputs_config[] = {PREFILL_THREADS, PREFILL_TILES, PREFILL_BLOCKS_PER_SM};

extern "C" __global__ void __launch_bounds__(PREFILL_THREADS, PREFILL_BLOCKS_PER_SM) fp8attn_paged_prefill_inputs(const PrefillParams p) {
  __shared__ PrefillRun run;
  __shared__ __align__(16) uint8_t tile[256 * 32];  // one tile's values, D <= 256 (out_v's rows)
  pdl_entry();
  const int qblocks = p.b * p.hq * p.q_chunks;
  if ((int)blockIdx.x < qblocks) {
    prefill_quantize(p);
    return;
  }
  const int g = blockIdx.x - qblocks;
  switch (p.d) {
    case 64: prefill_gather<4>(p, g, tile, run); break;
    case 128: prefill_gather<8>(p, g, tile, run); break;
    case 256: prefill_gather<16>(p, g, tile, run); break;
    default: prefill_gather<0>(p, g, tile, run);
  }
}
