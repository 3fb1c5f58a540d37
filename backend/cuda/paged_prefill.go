//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// A chunk of many new queries against the cache (a prompt after a cached
// prefix, chunked prefill) runs on the dense prefill kernels when the call
// allows FP8 queries (PagedProblem.Precision): one launch of
// fp8attn_paged_prefill_inputs quantizes the queries (as Memory.Quantize)
// and lays the sequences' pages out as plain FP8 tensors with one scale
// per (sequence, KV head), and the stage that bestStage picks for the
// shape (9 on Hopper, 10 on Ada) runs on them as Device.Attention does on
// FP8 device tensors. All of it is one stretch of the stream under the
// device's lock.

// prefillRowsPerSM places the switch to the prefill kernels: a call runs
// on them from B·Hq·Sq query rows of prefillRowsPerSM a multiprocessor.
// The split-KV kernels spread every row's work over the SMs (time about
// rows·keys/SMs); the prefill kernel's blocks are 128 rows of one query
// head, and until they fill the GPU its time is about one block's walk
// over the keys, whatever the rows. BenchmarkPagedPrefillRows (H200, B1
// Hkv8 D128, Hq 8, 32 and 64, 2048-32768 cached keys) has the split-KV
// kernels ahead up to 2048 rows and behind from 3072 (even at 3072 with
// 2048 keys): 20 rows an SM is 2640 on the H200's 132.
const prefillRowsPerSM = 20

// prefillMinQueries is the fewest new queries a sequence of a call on the
// prefill kernels has: their blocks are 128 rows of one sequence's query
// head, so a batch of many sequences with a few queries each (decode
// tokens, speculative drafts) fills a block with padding, whatever its
// rows B·Hq·Sq. BenchmarkPagedPrefillBatch (H200, B16 and B64 Hq32 Hkv8
// D128, 4096 cached tokens a sequence) has the split-KV kernels ahead up to
// Sq 16 (B16: 205 against 336 µs; B64: 741 against 1260) and behind from
// 32 (381 against 345; 1433 against 1306); at Sq 8 they take a third of the
// prefill kernels' time.
const prefillMinQueries = 32

// prefillStage returns the dense stage that runs p over the gathered cache,
// or 0 where the paged kernels run it: FP32 calls, calls inside a capture
// or reading device tables (their lengths change between replays), a
// sequence shorter than the queries, calls of fewer query rows (B·Hq·Sq)
// than s.prefillRows (prefillRowsPerSM a multiprocessor when 0) or fewer
// than prefillMinQueries new queries a sequence, shapes no
// FP8 prefill stage of the device takes, and batches of sequences of
// different lengths but on stage 9 (which bounds each sequence's rows by
// its own length, Params.seq_k, in tensors as long as the longest).
func (s *pagedKV) prefillStage(p *backend.PagedProblem) int {
	least := s.prefillLeast()
	if p.Precision != backend.FP8E4M3 || p.Tables != nil || p.QStarts != nil || s.dev.capturing() != nil || s.dev.paged.prefillInputs == nil ||
		p.B*p.Hq*p.Sq < least || least < 0 || p.Sq < prefillMinQueries {
		return 0
	}
	n, even := longest(p)
	for _, l := range p.SeqLens {
		if int(l) < p.Sq {
			return 0
		}
	}
	pr := prefillProblem(p, n)
	cc := s.dev.stageCapability()
	if s.cc != 0 {
		cc = min(cc, s.cc)
	}
	st := bestStage(pr.Shape, cc)
	if st != tiles.HopperStage && (st != tiles.AdaStage || !even) || supports(&pr, st) != nil || s.dev.loads(st, p.D) != nil {
		return 0
	}
	return st
}

// prefillLeast is the fewest query rows (B·Hq·Sq) of a call on the
// prefill kernels: s.prefillRows, or prefillRowsPerSM a multiprocessor
// where that is 0 (negative: none runs there).
func (s *pagedKV) prefillLeast() int {
	if s.prefillRows != 0 {
		return s.prefillRows
	}
	return prefillRowsPerSM * s.dev.SMs
}

// longest returns the length of p's longest sequence, and whether every
// sequence is as long.
func longest(p *backend.PagedProblem) (n int, even bool) {
	even = true
	for _, l := range p.SeqLens {
		even = even && l == p.SeqLens[0]
		n = max(n, int(l))
	}
	return n, even
}

// prefillProblem is the dense FP8 problem of p over sequences of n tokens.
func prefillProblem(p *backend.PagedProblem, n int) backend.Problem {
	return backend.Problem{
		Shape: backend.Shape{B: p.B, Hq: p.Hq, Hkv: p.Hkv, Sq: p.Sq, Sk: n, D: p.D},
		Scale: p.Scale, Mask: p.Mask, Layout: p.Layout, Precision: backend.FP8E4M3, Variants: p.Variants,
	}
}

// prefill runs p on stage st (prefillStage's): the lengths, block table and
// host queries uploaded, the queries quantized, the cache gathered, the
// stage launched over device buffers of the pagedKV's own, and the outputs
// downloaded for host slices. The caller is inside do.
func (s *pagedKV) prefill(p *backend.PagedProblem, st int) (err error) {
	pc, err := s.prefillInputs(p)
	if err != nil {
		return err
	}
	r, err := s.prefillKernels(p, st, pc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.release()) }()
	if p.QBuf != nil { // outputs stay on the device; out's Read reports a bad score factor
		return nil
	}
	var bad [1]int32
	copies := []hostCopy{{dev: cu.DevicePtr(r.params.Out), host: bytesOf(p.Out)}, {dev: cu.DevicePtr(r.bad), host: bytesOf(bad[:])}}
	if p.LSE != nil {
		copies = append(copies, hostCopy{dev: cu.DevicePtr(r.params.LSE), host: bytesOf(p.LSE)})
	}
	if err := s.dev.download(copies); err != nil {
		return fmt.Errorf("cuda: paged prefill: %w", err)
	}
	return factorError(bad[0], p.Hq)
}

// prefillCall is where a prefill call's inputs and outputs are on the
// device.
type prefillCall struct {
	n              int        // the longest sequence's tokens: the gathered tensors' keys
	even           bool       // every sequence is n tokens long
	q, lens, table uint64     // float32 queries, lengths, block table
	in             [6]*buffer // Q, K, V codes and their scales
	out, lse       *buffer    // the outputs (nil: the resident's own, downloaded)
	// rows, where not zero, are the batch, head and row strides (elements)
	// of the queries, their codes and the output, in place of the
	// layout's: a view of a larger tensor (paged_varlen.go).
	rows [3]int64
}

// prefillInputs finds p's longest sequence, reserves its buffers and
// uploads its lengths and block table, and its queries when they are host
// slices.
func (s *pagedKV) prefillInputs(p *backend.PagedProblem) (pc prefillCall, err error) {
	pc.n, pc.even = longest(p)
	var copies []hostCopy
	if p.QBuf != nil {
		var bufs []*buffer
		if bufs, err = ours(p.QBuf, p.OutBuf, p.LSEBuf); err != nil {
			return pc, err
		}
		for _, b := range bufs {
			if b != nil && (b.dev != s.dev || b.buf.p == 0) {
				return pc, fmt.Errorf("%w: cuda: a freed buffer, or one of another device", backend.ErrInvalid)
			}
		}
		pc.q, pc.out, pc.lse = uint64(bufs[0].buf.p), bufs[1], bufs[2]
	} else {
		if pc.q, err = s.put(&copies, "q", bytesOf(p.Q)); err != nil {
			return pc, err
		}
		if p.LSE != nil {
			if pc.lse, err = s.scratch("lse", 4*int64(p.B*p.Hq*p.Sq)); err != nil {
				return pc, err
			}
		}
	}
	if err := s.prefillTables(p, &pc, &copies); err != nil {
		return pc, err
	}
	return pc, s.dev.upload(copies)
}

// prefillTables adds p's lengths and block table to copies, joined (one
// copy: putJoined), and reserves the gathered inputs pc.in for its pc.n
// keys.
func (s *pagedKV) prefillTables(p *backend.PagedProblem, pc *prefillCall, copies *[]hostCopy) (err error) {
	at, err := s.putJoined(copies, "tables", bytesOf(p.SeqLens), bytesOf(p.BlockTable))
	if err != nil {
		return err
	}
	pc.lens, pc.table = at[0], at[1]
	return s.prefillScratch(p, pc, int64(p.B)*int64(p.Hq)*int64(p.Sq)*int64(p.D))
}

// prefillScratch reserves the gathered inputs pc.in of p for its pc.n
// keys, nq bytes of query codes.
func (s *pagedKV) prefillScratch(p *backend.PagedProblem, pc *prefillCall, nq int64) (err error) {
	nkv := int64(p.B) * int64(p.Hkv) * int64(pc.n) * int64(p.D)
	for i, size := range []int64{nq, nkv, nkv, 4 * int64(p.B*p.Hq), 4 * int64(p.B*p.Hkv), 4 * int64(p.B*p.Hkv)} {
		if pc.in[i], err = s.scratch([...]string{"q8", "k8", "v8", "q8 scales", "k8 scales", "v8 scales"}[i], size); err != nil {
			return err
		}
	}
	return nil
}

// prefillKernels issues the call's kernels: its inputs
// (fp8attn_paged_prefill_inputs) and stage st over them, on a resident
// the caller releases; where the paged form is on (pagedTilesOn, or the
// cache's inPlaceTiles) and takes the call, stage 9 alone, which reads the
// pages in place and encodes the queries itself (paged_tiles.go).
func (s *pagedKV) prefillKernels(p *backend.PagedProblem, st int, pc prefillCall) (*resident, error) {
	pr := prefillProblem(p, pc.n)
	r, err := s.dev.residentFor(&pr, pc.in, pc.out, pc.lse)
	if err != nil {
		return nil, err
	}
	err = r.setUp(pc.in, pc.out, pc.lse)
	if v := pc.rows; v[0] != 0 { // (before launch encodes the tensor maps, and tensorEntry checks them)
		r.params.QBatchStride, r.params.QHeadStride, r.params.QRowStride = v[0], v[1], v[2]
		r.params.OBatchStride, r.params.OHeadStride, r.params.ORowStride = v[0], v[1], v[2]
	}
	// The paged form reads K and V from the pages in place and encodes the
	// queries (paged_tiles.go): no inputs launch.
	paged := err == nil && st == tiles.HopperStage && (pagedTilesOn() || s.inPlaceTiles) && r.pagedTakes(s.cfg.PageSize)
	var kmap *tensorMap
	if paged {
		kmap, err = s.pagesMap()
	}
	var img *prefillImage
	if err == nil && !paged {
		img, err = r.prefillVImage(st)
	}
	if err == nil && img != nil && s.poison { // (tests) what the inputs kernel leaves unwritten stays NaN codes
		err = cu.MemsetD8Async(cu.DevicePtr(img.at), 0xFF, img.bytes, s.dev.stream)
	}
	if err == nil && !paged {
		err = s.prefillInputsLaunch(p, pc, img)
		r.vImageWritten = img != nil
	}
	switch {
	case pc.even:
	case st == tiles.HopperStage: // each sequence's tiles and rows bounded by its own length
		r.params.SeqK = pc.lens
	case err == nil: // (prefillStage takes no such batch elsewhere)
		err = fmt.Errorf("cuda: a paged prefill over sequences of different lengths on stage %d", st)
	}
	switch {
	case err != nil || !s.poison:
	case pc.rows[0] != 0: // a view's rows: the caller poisoned the tensor it views
		err = r.poisonLSELocked()
	default:
		err = r.poisonLocked()
	}
	if err == nil && paged { // (set last: a launch that does not run must not leave it)
		r.pagedNext = &pagedTiles{kmap: kmap, v: uint64(s.v), ks: uint64(s.ks), vs: uint64(s.vs), table: pc.table, q: pc.q,
			perSeq: int64(p.PagesPerSeq), heads: int64(s.cfg.KVHeads)}
	}
	if err == nil {
		err = r.launch(st)
	}
	if err != nil {
		return nil, errors.Join(err, r.release())
	}
	return r, nil
}

// prefillImage is where the paged prefill's inputs kernel writes V in
// place of the V tensor: stage 9's V image, of tiles of tile keys and rows
// rows each (its kernel's head dim).
type prefillImage struct {
	at         uint64
	bytes      int64
	rows, tile int
}

// prefillVImage returns the V image of the tiled tensor form where r's
// launch on stage st runs it (nil elsewhere: another stage, the one-tile
// form, which transposes V itself, or the pack path), allocating it: the
// inputs kernel then writes V there directly, and the launch packs none.
func (r *resident) prefillVImage(st int) (*prefillImage, error) {
	if st != tiles.HopperStage {
		return nil, nil
	}
	if fn, one := r.tensorEntry(); fn == nil || one {
		return nil, nil
	}
	// The inputs kernel takes tiles of 32 to 256 keys, a power of two
	// (dividing the 256 keys it pads to), of at most 256 rows.
	cfg := r.dev.hopperFor(&r.shape).cfg
	if n := cfg.BlockN; n < 32 || n > prefillZeroKeys || n&(n-1) != 0 || cfg.D > 256 {
		return nil, nil
	}
	if err := r.vImage(); err != nil {
		return nil, err
	}
	return &prefillImage{at: r.params.VImage, bytes: r.vImageBytes(), rows: cfg.D, tile: cfg.BlockN}, nil
}

// prefillInputsLaunch launches fp8attn_paged_prefill_inputs: p's queries
// quantized into pc.in[0] and in[3] (per (sequence, head), as
// Memory.Quantize does), its sequences' codes into in[1] and in[2] in p's
// layout (V into img instead where it is not nil), as long as the longest
// (a shorter sequence's slots past its length zeros up to the next 256
// keys), and their scales into in[4] and in[5].
// Its query chunks are prefillChunkRows'.
func (s *pagedKV) prefillInputsLaunch(p *backend.PagedProblem, pc prefillCall, img *prefillImage) error {
	n, in := pc.n, pc.in
	rows := prefillChunkRows(p.B*p.Hq, p.Sq, p.D, s.dev.SMs)
	chunks := (p.Sq + rows - 1) / rows
	words, err := s.dev.zeroWords(2 + 3*p.B*p.Hq)
	if err != nil {
		return err
	}
	bs, hs, rs := p.Layout.Strides(p.Hkv, n, p.D)
	qbs, qhs, qrs := p.Layout.Strides(p.Hq, p.Sq, p.D)
	if v := pc.rows; v[0] != 0 {
		qbs, qhs, qrs = int(v[0]), int(v[1]), int(v[2])
	}
	keys := n
	if img != nil { // the image's last tile written whole
		keys = (n + img.tile - 1) / img.tile * img.tile
	}
	tiles := (keys + 31) / 32
	pp := &prefillParams{K: uint64(s.k), V: uint64(s.v), KScale: uint64(s.ks), VScale: uint64(s.vs), SeqLens: pc.lens, BlockTable: pc.table,
		OutK: uint64(in[1].buf.p), OutV: uint64(in[2].buf.p), OutKScale: uint64(in[4].buf.p), OutVScale: uint64(in[5].buf.p),
		BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs),
		Q: pc.q, QCodes: uint64(in[0].buf.p), QScales: uint64(in[3].buf.p),
		QBatchStride: int64(qbs), QHeadStride: int64(qhs), QRowStride: int64(qrs), Words: words,
		B: int32(p.B), Hkv: int32(p.Hkv), D: int32(p.D), PageSize: int32(s.cfg.PageSize), PagesPerSeq: int32(p.PagesPerSeq),
		Hq: int32(p.Hq), Sq: int32(p.Sq), QRows: int32(rows), QChunks: int32(chunks), Tiles: int32(tiles), Sk: int32(n)}
	if img != nil {
		pp.VImage, pp.VIRows, pp.VITile = img.at, int32(img.rows), int32(img.tile)
	}
	blocks := p.B*p.Hq*chunks + (tiles+prefillTilesPerBlock-1)/prefillTilesPerBlock*p.Hkv*p.B
	return launchStruct(s.dev.paged.prefillInputs, blocks, 1, 1, prefillThreads, 0, s.dev.stream, unsafe.Pointer(pp))
}

// prefillThreads is fp8attn_paged_prefill_inputs's block size and
// prefillTilesPerBlock the 32-key tiles of a (sequence, KV head) one of its
// gather blocks lays out (PREFILL_THREADS and PREFILL_TILES, checked
// against fp8attn_paged_prefill_inputs_config when the module loads).
const (
	prefillThreads       = 256
	prefillTilesPerBlock = 2
)

// scratch is buf as a buffer of exactly n bytes, for the resident's
// checks (the pagedKV keeps the memory).
func (s *pagedKV) scratch(use string, n int64) (*buffer, error) {
	p, err := s.buf(use, n)
	if err != nil {
		return nil, err
	}
	return &buffer{dev: s.dev, buf: pooled{cu.DevicePtr(p), n}, n: n}, nil
}
