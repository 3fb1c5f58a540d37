// paged/ws.cuh: paged_ws, the warp-specialized kernel (sm_90a: bulk copies,
// mbarriers, a unit queue). Included by paged.cu only, in its order.
#pragma once

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The warp-specialized kernel's entry fp8attn_paged_wsq_d{D}, which the
// host launches for calls with more units than blocks, passing a ticket,
// has its blocks take their units after the first two from the ticket as
// they get to them (UnitQueue), so that blocks the memory serves faster
// take more; fp8attn_paged_ws_d{D} deals them round robin (unit k of block
// b is b + k·grid).

// UnitQueue hands the units a block takes from the ticket to all of its
// warps. Block b's units are b, b + grid, then 2·grid + t for the tickets t
// it draws (none at or past the call's units), one a unit: producer 0's
// lane 0 draws unit k+2 once it has issued its copies of unit k (if unit
// k+1 exists), and publishes it as publication k; every warp reads
// publication k after unit k (producers before they prefetch unit k+2's
// pages, consumers before unit k+1). Publications go round NS slots: a
// slot's full barrier completes on the publisher's arrival, its empty
// barrier on one arrival from each of the READERS warps, which the
// publisher waits for before it writes the slot again (a producer with no
// tiles in short units could otherwise run NS publications ahead of a
// consumer). A unit's result does not depend on its block, so the
// results do not depend on which block drew which ticket.
template <int NS, int READERS> struct UnitQueue {
  uint64_t full[NS], empty[NS];
  int uid[NS];
  __device__ __forceinline__ void init() {
    for (int s = 0; s < NS; s++) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], READERS);
    }
  }
  // publish (one thread) makes v publication j.
  __device__ __forceinline__ void publish(int j, int v) {
    const int s = j % NS;
    if (j >= NS) hopper::mbar_wait(&empty[s], (j / NS - 1) & 1);
    uid[s] = v;
    hopper::mbar_arrive(&full[s]);
  }
  // read (a whole warp) returns publication j: lane 0 reads the slot and
  // frees it, and passes it on (an mbarrier arrival releases only the
  // arriving thread's own reads: racecheck).
  __device__ __forceinline__ int read(int j, int lane) {
    const int s = j % NS;
    int v = 0;
    if (lane == 0) {
      hopper::mbar_wait(&full[s], (j / NS) & 1);
      v = uid[s];
      hopper::mbar_arrive(&empty[s]);
    }
    return __shfl_sync(0xffffffffu, v, 0);
  }
};

// The warp-specialized kernel (sm_90a build only; internal/tiles.PagedWSConfig):
// one block an SM walks units blockIdx.x, blockIdx.x + gridDim.x, ... Tile
// k of a unit goes to consumer warp k % CW (whatever units came before: a
// unit's result does not depend on the block that ran it), through the
// ring's slots w, w+CW, ... of that warp, in turn: the warp's j-th tile
// over the block's units is slot w + CW·(j % (RING/CW)) in phase
// j / (RING/CW).
//   Producers (warps CONSUMERS.. on, one for each consumer warp, producer
//   pi streaming consumer pi's tiles): the lanes of
//   each work out 32 of its tiles' places at once (page, offset); lane 0
//   then, tile after tile, waits for the slot to be empty, issues 4-byte
//   cp.asyncs of the page's K and V scales into the slot's header and the
//   two bulk copies of its keys and values (32·D contiguous bytes each: the
//   cache's tile layout is the shared-memory one). The slot's full barrier
//   completes when the bytes have landed and the scales' copies arrive
//   (cp.async.mbarrier.arrive.noinc: the barrier counts two arrivals).
//   Consumers: a slot always serves the same warp (RING a multiple of CW),
//   whose 32 lanes free it after each tile, and which has consumed a slot's
//   previous tile before it waits for the next, so a phase parity never
//   aliases; each warp runs its own online softmax for its unit; at a
//   unit's end the consumers merge (named barrier 1) in their own area
//   while the producers stream on into the next unit.
//   Boundaries: each unit's sequence length and first pages are loaded
//   while the unit before it streams (a load issued at the boundary waits
//   behind the memory's queue of copies, microseconds); the copies carry
//   an evict_first L2 policy, so that its queries are found in L2.
//   Registers: the roles are whole warpgroups, and setmaxnreg gives the
//   producers' registers to the consumers (each producer warp serves one
//   consumer warp: with two consumers a producer, a consumer that fell
//   behind held up the other's tiles).
//   Splits: the unit that finishes an item's last split (a counter per
//   item, left 0 again) merges the item's partial rows, so that no merge
//   kernel follows.
// (v10a had one producer lane work out every tile itself, an integer
// division and some 100 instructions a tile: the producer, not the memory,
// set the pace, at 2.6 TB/s on B8 Hq32 Hkv8 Sk8192; with the places worked
// out by the lanes, one producer's 60 instructions a tile still did; four
// producers of two consumers each held one consumer's tiles back behind
// the other's.)
template <int D, class State, bool DYNAMIC>
__device__ __forceinline__ void paged_ws(const PagedParams p) {
  using T = PagedWSTiles<D>;
  constexpr int CW = T::CONSUMERS, R = T::RING, TILE = T::TILE;
  static_assert(T::KEYS == 32 && T::ROWS == 8 && TILE == 64 * D, "32-key tiles of keys and values, 8 rows");
  static_assert(R % CW == 0, "a slot serves one consumer warp");
  constexpr int PW = T::PRODUCERS;
  static_assert(PW == CW && R % CW == 0, "a slot serves one consumer warp and its producer warp");
  static_assert(CW >= 8, "the split merge runs merge_row_warp on a consumer warp a row");
  static_assert(CW % 4 == 0 && PW % 4 == 0 && 32 * (CW * T::CONSUMER_REGS + PW * T::PRODUCER_REGS) <= 65536,
                "whole warpgroups of each role, their registers within the SM's");
  // The merge area: the warps' rows, or merge_row_warp's weights.
  constexpr int SOF = CW * 8 * D > 8 * 256 ? CW * 8 * D : 8 * 256;
  static_assert(T::SMEM == R * TILE + R * 24 + T::MERGE && T::MERGE == SOF * 4 + CW * 17 * 4, "layout");
  extern __shared__ __align__(128) uint8_t ws_smem[];
  uint8_t* ring = ws_smem;
  uint64_t* full = (uint64_t*)(ws_smem + R * TILE);
  uint64_t* empty = full + R;
  float2* scales = (float2*)(empty + R);
  float* so = (float*)(scales + R);  // [CW][8][D], or merge_row_warp's [8][256]
  float(*sm_m)[8] = (float(*)[8])(so + SOF);
  float(*sm_l)[8] = sm_m + CW;
  float* sm_vs = (float*)(sm_l + CW);

  __shared__ UnitQueue<4, CW + PW> queue;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned t_entry = 0;  // (a profile build's entry time, written after pdl_wait)
  PROFILE_CLOCK(t_entry);
  const PagedDivs dv(p);  // from the parameters alone: before pdl_wait, beside the kernel before
  if (threadIdx.x == 0) {
    for (int s = 0; s < R; s++) {
      hopper::mbar_init(&full[s], 2);   // the producer's arrival with the bytes, and its scales' cp.asyncs
      hopper::mbar_init(&empty[s], 32);  // every lane of the consuming warp
    }
    if (DYNAMIC) queue.init();
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int units = p.b * p.hkv * p.row_blocks * p.splits;
  const long long blk_bytes = (long long)D * p.page_size;
  // The block's k-th unit (UnitQueue, where DYNAMIC: the entry point's
  // choice, where the host passed a ticket); from k = 2 on, a warp reads
  // each publication once, in order.
  constexpr bool dynamic = DYNAMIC;
  auto unit_at = [&](int k) -> int {
    return k < 2 || !dynamic ? blockIdx.x + k * gridDim.x : queue.read(k - 2, lane);
  };

  // A consumer warp's slots: w, w + CW, ..., PER of them. The host uses
  // fewer than the ring holds where a block has one unit (ws_slots):
  // fewer bytes in flight, less waiting in the memory's queues; a block
  // with several units wants the whole ring to cover its pauses between them.
  const int PER = max(1, min(R, p.ws_slots) / CW);
  if (warp >= CW) {  // a producer: consumer warp pi's tiles (a unit's tiles k = pi, pi+PW, ...)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(T::PRODUCER_REGS) : "memory");
    WS_STAMP(warp == CW && lane == 0, 10);
    const int pi = warp - CW;
    const int table_tiles = p.pages_per_seq * (p.page_size / 32);  // a block-table row's tiles
    // first loads what unit uid's first batch needs: its sequence's length
    // and the pages of this producer's first 32 tiles (lane l: tile pi +
    // PW·l from the split's start; an entry past the sequence is read,
    // within the table's row, and not used). Each unit's are loaded while
    // the one before streams: a load at the boundary would wait behind the
    // memory's queue of copies.
    // (Under a window a split starts at its first row's window, which
    // depends on the length: the page load waits for it.)
    auto first = [&](int uid, int& n, int& pg) {
      n = pg = 0;
      if (uid >= units) return;
      const int b = paged_unit_seq(dv, uid);
      int t0 = dv.splits.mod(uid) * p.tiles_per_split + pi + PW * lane;
      n = p.seq_lens[b];
      if (p.window > 0) t0 = paged_unit_at(p, dv, uid, n).ta + pi + PW * lane;
      if (t0 < table_tiles) pg = p.block_table[(long long)b * p.pages_per_seq + dv.page.div(t0 * 32)];
    };
    int n_cur, pg_cur, done = 0;  // done: this producer's tiles so far
    // (Everything up to the first copy reads
    // only the lengths and the block table: pdl_wait comes just before it,
    // or before the return of a producer that has no tiles.)
    bool waited = false;
    first(blockIdx.x, n_cur, pg_cur);
#ifdef FP8ATTN_PROFILE
    asm volatile("" ::"r"(n_cur), "r"(pg_cur));  // the loads have returned
    WS_STAMP(warp == CW && lane == 0, 11);
#endif
    const int G = gridDim.x;
    int uid = blockIdx.x, unext = blockIdx.x + G;
    for (int ku = 0; uid < units; ku++) {  // the block's ku-th unit
      int n_next, pg_next;
      first(unext, n_next, pg_next);
      const PagedUnit u = paged_unit_at(p, dv, uid, n_cur);
      const int count = max(0, u.tb - u.ta);
      const int* table = p.block_table + (long long)u.b * p.pages_per_seq;
      int pg = pg_cur;
      // Batches of 32 of this producer's tiles: lane l works out tile
      // k0 + PW·l's place (and loads the next batch's page), then lane 0
      // issues them in order.
      for (int k0 = pi; k0 < count; k0 += 32 * PW) {
        const int k = k0 + PW * lane, kn = k + 32 * PW;
        const int pg_after = kn < count ? table[dv.page.div((u.ta + kn) * 32)] : 0;
        long long off = 0;
        int blk = 0;
        if (k < count) {
          blk = pg * p.hkv + u.kh;
          off = blk * blk_bytes + (long long)dv.page.mod((u.ta + k) * 32) * D;
        }
        const int cnt = min(32, (count - k0 + PW - 1) / PW);
        for (int j = 0; j < cnt; j++) {
          const long long offj = __shfl_sync(0xffffffffu, off, j);
          const int blkj = __shfl_sync(0xffffffffu, blk, j);
#ifdef FP8ATTN_PROFILE
          asm volatile("" ::"l"(offj), "r"(blkj));
          WS_STAMP(pi == 0 && lane == 0 && done + j == 0, 12);
#endif
          if (!waited) {  // the warp's first copy: the scales and tiles an append before may have written
            pdl_wait();
            waited = true;
          }
          if (lane == 0) {
            const int at = done + j, slot = pi + CW * (at % PER), phase = at / PER & 1;
            if (at >= PER) hopper::mbar_wait(&empty[slot], phase ^ 1);  // its previous tile consumed
            const uint32_t sc = hopper::smem_u32(&scales[slot]);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sc), "l"(p.k_scale + blkj) : "memory");
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(sc + 4), "l"(p.v_scale + blkj) : "memory");
            asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(hopper::smem_u32(&full[slot]))
                         : "memory");
            hopper::mbar_expect_tx(&full[slot], TILE);
            const uint64_t pol = hopper::evict_first_policy();
            hopper::bulk_load_hinted(ring + slot * TILE, p.k + offj, 32 * D, &full[slot], pol);
            hopper::bulk_load_hinted(ring + slot * TILE + 32 * D, p.v + offj, 32 * D, &full[slot], pol);
            WS_STAMP(pi == 0 && at == 0, 2);
          }
          __syncwarp();
        }
        done += cnt;
        pg = pg_after;
      }
      if (dynamic && pi == 0 && unext < units) {  // unit ku+2 drawn (after pdl_wait: the launch before reset the counter)
        if (!waited) {
          pdl_wait();
          waited = true;
        }
        if (lane == 0) {
          // The tickets a launch hands out: every block whose second unit
          // exists draws until it draws one past the units; the last of
          // them resets the counter for the next launch.
          const int tickets = max(0, units - 2 * G) + min(G, max(0, units - G));
          const int tk = atomicAdd(p.ticket, 1);
          if (tk == tickets - 1) atomicExch(p.ticket, 0);  // every ticket of the launch drawn
          queue.publish(ku, 2 * G + tk);
        }
        __syncwarp();
      }
      n_cur = n_next;
      pg_cur = pg_next;
      uid = unext;
      if (uid < units) unext = unit_at(ku + 2);
    }
    if (!waited) pdl_wait();  // (pdl.cuh: before any return)
    if (lane == 0) asm volatile("cp.async.wait_all;\n" ::: "memory");
    return;
  }

  // The consumers. Lane l names shared row l of the tile for ldmatrix: key
  // key_of_row(l), whose chunks are swizzled by k_swizzle. Warp w takes a
  // unit's tiles w, w+CW, ..., whatever units came before, so that a unit's
  // result does not depend on the block that ran it.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::CONSUMER_REGS) : "memory");
  const int g = lane >> 2, t = lane & 3, kl = key_of_row(lane);
  const int krow = kl * D, ksw = k_swizzle(kl, D / 16);
  auto sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(CW * 32) : "memory"); };
  __shared__ int last_split;
  State st;
  // The next unit's sequence length loads while this one's tiles stream.
  // (Its queries too, held in registers, made ptxas spill at D = 128: the
  // consumer code already uses most of the registers setmaxnreg gives it,
  // about 200. Loaded at the boundary, they come from L2, where the cache's
  // evict_first copies leave them.)
  int uid = blockIdx.x, unext = blockIdx.x + gridDim.x;
  int n_cur = uid < units ? p.seq_lens[paged_unit_seq(dv, uid)] : 0, done = 0;  // done: this warp's tiles so far
  pdl_wait();  // before the queries (a kernel before may write them)
  WS_STAMP(threadIdx.x == 0, 1);
  PROFILE_VALUE(threadIdx.x == 0, 0, 0, 0, t_entry);
  (void)t_entry;
  for (int ku = 0; uid < units; ku++) {  // the block's ku-th unit
    const PagedUnit u = paged_unit_at(p, dv, uid, n_cur);
    st.start(p, u, g, t);
    WS_STAMP(warp == 0 && lane == 0 && done == 0, 15);
    const int n_next = unext < units ? p.seq_lens[paged_unit_seq(dv, unext)] : 0;
    const int count = max(0, u.tb - u.ta);
    // The unit's tiles, the loop built without the softcap (the plain
    // loop) and with it, chosen once a unit.
    auto walk = [&](auto capped) {
      constexpr bool CAP = decltype(capped)::value;
      for (int k = warp; k < count; k += CW, done++) {
        const int slot = warp + CW * (done % PER);
        hopper::mbar_wait(&full[slot], done / PER & 1);
        WS_STAMP(warp == 0 && lane == 0 && done == 0, 3);
        const float2 sc = scales[slot];
        const uint8_t* sk = ring + slot * TILE;
        st.template tile<CAP>(sk + krow, ksw, sk + 32 * D, sc.x, sc.y, (u.ta + k) * 32, lane, t);
        // Every lane releases its own reads of the slot (an arrival releases
        // only the arriving thread's accesses: with lane 0 alone arriving
        // after a __syncwarp, racecheck reported the next copies into the
        // slot racing the other lanes' reads).
        hopper::mbar_arrive(&empty[slot]);
      }
    };
    if (p.softcap > 0.f)
      walk(BoolTag<true>{});
    else
      walk(BoolTag<false>{});
    n_cur = n_next;
    PROFILE_ONLY(sync());  // every warp's last tile done (merge_warps starts with this barrier)
    WS_STAMP(warp == 0 && lane == 0, 4);
    st.finish();
    WS_STAMP(warp == 0 && lane == 0, 20);
    merge_warps<D, D, CW, true>(p, u, st, so, sm_m, sm_l, sm_vs, warp, lane, sync);
    WS_STAMP(warp == 0 && lane == 0, 5);
    if (p.splits > 1) {
      // The last of the item's splits to get here merges them. The barrier
      // orders every consumer's partial rows before thread 0's add, whose
      // release makes them visible at GPU scope (PTX fences are
      // cumulative); the merging block's add acquires the other splits',
      // and the barrier after it passes them on to its warps. (CUTLASS's
      // GenericBarrier does the same; a __threadfence in every thread
      // before the add and after it cost 0.5-1 us at the end of a call.)
      sync();
      const long long item = ((long long)u.b * p.hkv + u.kh) * p.row_blocks + u.rb;
      if (warp == 0 && lane == 0) {
        int before;
        asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], 1;\n" : "=r"(before) : "l"(&p.counters[item]) : "memory");
        last_split = before == p.splits - 1;
        if (last_split) p.counters[item] = 0;  // for the next launch
      }
      sync();
      WS_STAMP(warp == 0 && lane == 0, 6);
      if (last_split) {
        if (warp < u.rows_n) merge_row_warp<D>(p, u.b, u.kh, u.rb, warp, lane, so + 256 * warp);
      }
      PROFILE_VALUE(warp == 0 && lane == 0, 0, 0, 8, last_split);
    }
    WS_STAMP(warp == 0 && lane == 0, 7);
    PROFILE_VALUE(warp == 0 && lane == 0, 0, 0, 9, profile::sm());
    uid = unext;
    if (uid < units) unext = unit_at(ku + 2);
  }
}
#endif
