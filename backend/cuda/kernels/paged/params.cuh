// paged/params.cuh: the paged module's parameter blocks (mirrored by
// backend/cuda), their exported layouts, and the warp-specialized kernel's
// profile events. Included by paged.cu only, in its order.
#pragma once

// WS_STAMP(cond, slot) is an event of the warp-specialized kernel
// (profile.cuh: kernel 0, row 0, %globaltimer), warp 0 of each block at its
// steps, the last unit's overwriting earlier ones: 0 entry, 1 past
// pdl_wait, 2 the first bulk copy issued (producer 0), 3 consumer warp 0's
// first tile landed, 4 every consumer's last tile done, 5 merge_warps done,
// 6 the split counter read, 7 the end; slot 8 is 1 where the block merged
// the splits, slot 9 its SM; 10 producer 0 past setmaxnreg, 11 its first
// unit's length and pages in registers, 12 its first tile's place worked
// out, 13 the merge's split weights loaded (warp 0), 14 its rows weighed,
// 15 consumer warp 0's first unit started (queries loaded); in the last
// unit's merge_warps (warp 0): 16 every warp arrived, 17 the maxima and
// sums stored, 18 the rows weighed and stored, 19 the rows combined and
// written; 20 st.finish done. backend/cuda's TestWSTimeline reads them.
#define WS_STAMP(cond, slot) PROFILE_TIME(cond, 0, 0, slot)

struct PagedParams {
  const uint8_t *k, *v;            // the pool: per (page, KV head) K [P][D], V [D][P]
  const float *k_scale, *v_scale;  // per (page, KV head)
  const float* q;                  // [B][Hq][Sq][D] with the strides below
  float *out, *lse;                // out as q; lse [B][Hq][Sq] or null
  float *part_out, *part_lse;      // the splits' partial rows: [item][split][8][D], [item][split][8]
  const int *seq_lens, *block_table;  // [B], [B][pages_per_seq]
  int* counters;                      // per item, splits finished (the warp-specialized kernel; 0 between launches)
  long long batch_stride, head_stride, row_stride;  // of q and out, in elements
  int b, hq, hkv, sq, d, page_size, pages_per_seq, mask;  // mask: 0 none, 2 causal lower-right
  int row_blocks, splits, tiles_per_split;  // grid (splits, hkv·row_blocks, b)
  float score_scale;  // softmax scale·log2(e), from float64 on the host
  int ws_slots;       // the warp-specialized kernel: ring slots in use (a multiple of its consumer warps)
  int* ticket;        // the warp-specialized kernel's units handed out at run time: null, or a counter (0 between launches)
  // The attention variants (all off: 0, 0, 0, null).
  int window;          // sliding window W (0: none; mask 2 only): a query at position pos sees keys pos-W < j <= pos
  float softcap;       // softcap·log2(e) (0: none): a score x (log2 domain) becomes softcap·tanh(x / softcap)
  float inv_softcap;   // 1 / (softcap·log2(e)), from float64 on the host
  const float* sinks;  // [hq] sink logits (natural log), or null: e^sink joins the row's final denominator
  // A varlen batch (the cp.async kernel and the merge only): q_starts [b+1]
  // offsets, sequence b's queries being rows q_starts[b].. of one packed
  // batch (q, out [1][hq][q_total][d] by the strides, lse [1][hq][q_total]),
  // sq their largest count; var_blocks, for each row block of the batch in
  // order, its (sequence, row block of the sequence), the items numbered
  // row block major (item = row block·hkv + kh). Null: every sequence has
  // sq queries at q + b·batch_stride.
  const int* q_starts;
  const int2* var_blocks;
  int q_total;
};

struct AppendParams {
  uint8_t *k, *v;
  float *k_scale, *v_scale;
  const float *src_k, *src_v;  // [B][Hkv][N][D] with the strides below
  const int* runs;             // [nruns][5]: batch entry, first token, tokens, page, first slot
  long long batch_stride, head_stride, row_stride;
  int hkv, d, page_size, nruns;
};

// CheckParams: the new keys and values of an append from device memory,
// n elements each (whole tensors), and the flag set when one is NaN or ±Inf.
struct CheckParams {
  const float *k, *v;
  int* bad;
  long long n;
};

// PrefillParams: the inputs of a chunk of queries run on the prefill
// kernels (fp8attn_paged_prefill_inputs): the queries quantized, and the
// cached keys and values of a batch of sequences laid out as plain FP8
// tensors as long as the longest.
struct PrefillParams {
  const uint8_t *k, *v;                // the pool
  const float *k_scale, *v_scale;      // per (page, KV head)
  const int *seq_lens, *block_table;   // [B], [B][pages_per_seq]
  uint8_t *out_k, *out_v;              // [B][Hkv][sk][D] with the strides below
  float *out_k_scale, *out_v_scale;    // [B][Hkv]
  long long batch_stride, head_stride, row_stride;  // of out_k and out_v, in codes
  const float* q;                      // [B][Hq][Sq][D] with the strides below
  uint8_t* q_codes;                    // the same layout
  float* q_scales;                     // [B][Hq]
  long long q_batch_stride, q_head_stride, q_row_stride;  // of q and q_codes, in elements
  unsigned* words;  // zero between launches: the query chunks' ticket and finished count, then per query head its amax, chunks arrived, chunks encoded
  int b, hkv, d, page_size, pages_per_seq;
  int hq, sq, q_rows, q_chunks;  // rows a query chunk, chunks a head
  int tiles;                     // key tiles (32 keys) of the longest sequence (its image's, v_image): the gather's blocks are ceil(tiles / PREFILL_TILES)·hkv·b
  int sk;                        // keys of out_k and out_v a (sequence, head): the longest sequence's
  uint8_t* v_image;              // null, or stage 9's V image, written in place of out_v
  int vi_rows, vi_tile;          // the image's rows (its kernel's head dim) and keys a tile (a power of two)
};

#define PP_OFF(f) (int)offsetof(PagedParams, f)
#define PF_OFF(f) (int)offsetof(PrefillParams, f)
#define CP_OFF(f) (int)offsetof(CheckParams, f)
#define AP_OFF(f) (int)offsetof(AppendParams, f)
extern "C" __device__ const int fp8attn_paged_params_layout[] = {
    (int)sizeof(PagedParams), PP_OFF(k), PP_OFF(v), PP_OFF(k_scale), PP_OFF(v_scale), PP_OFF(q), PP_OFF(out),
    PP_OFF(lse), PP_OFF(part_out), PP_OFF(part_lse), PP_OFF(seq_lens), PP_OFF(block_table), PP_OFF(counters), PP_OFF(batch_stride),
    PP_OFF(head_stride), PP_OFF(row_stride), PP_OFF(b), PP_OFF(hq), PP_OFF(hkv), PP_OFF(sq), PP_OFF(d),
    PP_OFF(page_size), PP_OFF(pages_per_seq), PP_OFF(mask), PP_OFF(row_blocks), PP_OFF(splits),
    PP_OFF(tiles_per_split), PP_OFF(score_scale), PP_OFF(ws_slots), PP_OFF(ticket), PP_OFF(window), PP_OFF(softcap),
    PP_OFF(inv_softcap), PP_OFF(sinks), PP_OFF(q_starts), PP_OFF(var_blocks), PP_OFF(q_total)};
extern "C" __device__ const int fp8attn_append_params_layout[] = {
    (int)sizeof(AppendParams), AP_OFF(k), AP_OFF(v), AP_OFF(k_scale), AP_OFF(v_scale), AP_OFF(src_k),
    AP_OFF(src_v), AP_OFF(runs), AP_OFF(batch_stride), AP_OFF(head_stride), AP_OFF(row_stride), AP_OFF(hkv),
    AP_OFF(d), AP_OFF(page_size), AP_OFF(nruns)};
extern "C" __device__ const int fp8attn_check_params_layout[] = {
    (int)sizeof(CheckParams), CP_OFF(k), CP_OFF(v), CP_OFF(bad), CP_OFF(n)};
extern "C" __device__ const int fp8attn_prefill_params_layout[] = {
    (int)sizeof(PrefillParams), PF_OFF(k), PF_OFF(v), PF_OFF(k_scale), PF_OFF(v_scale), PF_OFF(seq_lens),
    PF_OFF(block_table), PF_OFF(out_k), PF_OFF(out_v), PF_OFF(out_k_scale), PF_OFF(out_v_scale),
    PF_OFF(batch_stride), PF_OFF(head_stride), PF_OFF(row_stride), PF_OFF(q), PF_OFF(q_codes), PF_OFF(q_scales),
    PF_OFF(q_batch_stride), PF_OFF(q_head_stride), PF_OFF(q_row_stride), PF_OFF(words), PF_OFF(b), PF_OFF(hkv),
    PF_OFF(d), PF_OFF(page_size), PF_OFF(pages_per_seq), PF_OFF(hq), PF_OFF(sq), PF_OFF(q_rows), PF_OFF(q_chunks),
    PF_OFF(tiles), PF_OFF(sk), PF_OFF(v_image), PF_OFF(vi_rows), PF_OFF(vi_tile)};
