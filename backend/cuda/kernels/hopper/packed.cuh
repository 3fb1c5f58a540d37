// hopper/packed.cuh: the rows of stage9's packed form
// (fp8attn_stage9tv_d<D>): the paged form (hopper/paged.cuh) over a varlen
// batch in one launch, a block an item of one sequence's rows for one KV
// head, its query heads' rows packed query-major (GQA rows: a decode
// token's group of query heads fills rows of one block, as a prompt
// chunk's rows do), so that prompt chunks and decode tokens share a grid.
// Included by hopper.cuh only, inside namespace hopper, after
// hopper/softmax.cuh and hopper/shell.cuh.
#pragma once

// PackedRows is a block of the packed form (fp8attn_stage9tv_d<D>, a
// varlen batch in one launch): of sequence b's rows for KV head kvh packed
// query-major, packed row R being query R / group of query head kvh·group
// + R % group, its rows r0 .. r0 + nrows - 1 (block row r is packed row
// r0 + r). The sequence's count new queries are rows start .. start +
// count - 1 of the call's packed tensors, its last count positions.
struct PackedRows {
  int b, kvh, r0, nrows, group, start, count;
  __device__ __forceinline__ int query(int r) const { return (r0 + r) / group; }
  __device__ __forceinline__ int head(int r) const { return kvh * group + (r0 + r) % group; }
};

// packed_rows is block x's PackedRows: item x of tp.items (b, kvh, r0,
// nrows) and sequence b's queries from tp.q_starts.
__device__ __forceinline__ PackedRows packed_rows(const TensorParams& tp, int group, int x) {
  const int4 it = tp.items[x];
  const int start = tp.q_starts[it.x];
  return PackedRows{it.x, it.y, it.z, it.w, group, start, tp.q_starts[it.x + 1] - start};
}

// packed_keys is the RowKeys of a consumer thread of warpgroup cw whose
// rows are block rows lr0 and lr0 + 8 of pr (n the sequence's keys): a
// row past the block's is taken as its last (its results are dropped).
__device__ __forceinline__ RowKeys packed_keys(const Params& p, const PackedRows& pr, int lr0, int cw, long long n) {
  const int last = pr.nrows - 1;
  const int q0 = pr.query(min(lr0, last)), q1 = pr.query(min(lr0 + 8, last));
  const int qf = pr.query(min(64 * cw, last)), ql = pr.query(min(64 * cw + 63, last));
  return RowKeys{first_key(p, q0, pr.count, n), visible_keys(p, q0, pr.count, n), first_key(p, q1, pr.count, n),
                 visible_keys(p, q1, pr.count, n), visible_keys(p, qf, pr.count, n), first_key(p, ql, pr.count, n)};
}

// packed_source is the float32 row block row lr of pr reads (null past its
// rows), in the call's packed queries (batch entry 0, Params' strides).
__device__ __forceinline__ const float* packed_source(const TensorParams& tp, const PackedRows& pr, int lr) {
  const Params& p = tp.f.p;
  if (lr >= pr.nrows) return nullptr;
  return tp.q_rows + pr.head(lr) * p.q_head_stride + (long long)(pr.start + pr.query(lr)) * p.q_row_stride;
}

// merge_halves merges the states of an item's two warpgroups, each over
// its half of every tile's keys (Consumer's HALF, the same rows), into
// warpgroup 0's, through shared memory at x (the ring, free once both
// loops are done: every tile's copies landed and were read): each row's
// larger maximum and each side's factor 2^(m - max) on its sums and O. (O's
// units agree: both sides read every tile, so their latest V scale is the
// same.) Warpgroup 1's thread tid holds the same rows as warpgroup 0's
// (the wgmma layout's), and writes its values a field at a time (a
// field's 128 values together).
template <int D>
__device__ __forceinline__ void merge_halves(float* x, int cw, int tid, float (&o)[D / 2], float (&m)[2], float (&l)[2], float (&lsum)[2]) {
  constexpr int F = D / 2;  // o's values, then m, l and lsum (two each)
  auto at = [&](int field) -> float& { return x[field * 128 + tid]; };
  asm volatile("bar.sync 9, 256;\n" ::: "memory");  // both loops done
  if (cw == 1) {
#pragma unroll
    for (int i = 0; i < F; i++) at(i) = o[i];
#pragma unroll
    for (int j = 0; j < 2; j++) {
      at(F + j) = m[j];
      at(F + 2 + j) = l[j];
      at(F + 4 + j) = lsum[j];
    }
    asm volatile("bar.arrive 10, 256;\n" ::: "memory");
    return;
  }
  asm volatile("bar.sync 10, 256;\n" ::: "memory");
  float f0[2], f1[2];
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const float m1 = at(F + j), mx = fmaxf(m[j], m1), mu = mx == NEG_INF ? 0.f : mx;
    const float a0 = exp2f(m[j] - mu), a1 = exp2f(m1 - mu);
    m[j] = mx;
    l[j] = fmaf(l[j], a0, at(F + 2 + j) * a1);
    lsum[j] = fmaf(lsum[j], a0, at(F + 4 + j) * a1);
    f0[j] = a0;
    f1[j] = a1;
  }
#pragma unroll
  for (int i = 0; i < F; i++) {  // (o[i]'s row: half (i >> 1) & 1, as the fold's)
    const int j = (i >> 1) & 1;
    o[i] = fmaf(o[i], f0[j], at(i) * f1[j]);
  }
}

// epilogue_packed is the epilogue of a packed block: the thread's rows
// lr0 and lr0 + 8 of pr (those below nrows), each at its own query head
// and packed row of the outputs (the LSE [Hq][sq], sq the packed rows),
// with its head's sink.
template <int D>
__device__ __forceinline__ void epilogue_packed(const Params& p, const PackedRows& pr, const float (&o)[D / 2], const float (&m)[2],
                                                const float (&l)[2], const float (&lsum)[2], float vs, bool summed, int lr0, int tq) {
  const float l0 = group_sum<4>(l[0]), l1 = group_sum<4>(l[1]);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    const int lr = lr0 + 8 * half;
    if (lr >= pr.nrows) continue;
    const int h = pr.head(lr);
    const long long row = pr.start + pr.query(lr);
    const float sink = p.sinks ? p.sinks[h] * LOG2E : NEG_INF;
    epilogue_row<D>(p.out + h * p.o_head_stride + row * p.o_row_stride, p.lse ? p.lse + h * p.sq + row : nullptr, o, m[half],
                    half ? l1 : l0, lsum[half], vs, sink, summed, half, tq, p.d);
  }
}
