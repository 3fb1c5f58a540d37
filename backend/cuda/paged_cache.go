//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// The paged FP8 KV cache on the GPU (kernels/paged.cu): the pool of pages
// lives in device memory; Append quantizes new tokens into it on the device
// (bit for bit as the cpu backend does); Attention runs the split-KV kernel
// over the block table and merges the splits.

// NewPagedKV implements backend.PagedBackend: a paged cache in the memory of
// device 0. Head dims are tiles.PagedHeadDims and page sizes multiples of
// tiles.PagedPageMultiple; others get ErrUnsupported.
func (b *kernelBackend) NewPagedKV(c backend.PagedConfig) (backend.PagedKV, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	tc, err := tiles.Paged(c.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrUnsupported, err)
	}
	if c.PageSize%tiles.PagedPageMultiple != 0 {
		return nil, fmt.Errorf("%w: the cuda backend's pages hold a multiple of %d tokens, not %d", backend.ErrUnsupported, tiles.PagedPageMultiple, c.PageSize)
	}
	d, err := openDevice(0)
	if err != nil {
		return nil, err
	}
	if d.capturing() != nil {
		return nil, errCapture("making a paged cache")
	}
	s := &pagedKV{dev: d, cfg: c, tc: tc, poison: b.poison, wsBlocks: b.pagedWSBlocks, prefillRows: b.pagedPrefillRows, cc: b.cc,
		inPlaceTiles: b.pagedInPlaceTiles, packed: b.pagedPacked, groups: b.pagedGroups}
	s.perSM, s.smem = pagedOccupancy(d, tc, 0)
	if f, ok := d.paged.ws[c.HeadDim]; ok && !b.pagedCpAsync {
		s.ws, s.wsq = f, d.paged.wsq[c.HeadDim]
		s.wsCfg, _ = tiles.PagedWS(c.HeadDim)
	}
	codes := int64(c.Pages) * int64(c.PageSize) * int64(c.KVHeads) * int64(c.HeadDim)
	scales := 4 * int64(c.Pages) * int64(c.KVHeads)
	err = d.do(func() error {
		for _, a := range []struct {
			p *cu.DevicePtr
			n int64
		}{{&s.k, codes}, {&s.v, codes}, {&s.ks, scales}, {&s.vs, scales}} {
			p, err := d.devAlloc(a.n)
			if err != nil {
				return fmt.Errorf("cuda: paged cache of %d bytes: %w", 2*codes+2*scales, err)
			}
			*a.p = p
			s.owned = append(s.owned, p)
		}
		// Every block starts as zeros with scale 0, as a fresh cpu cache
		// (a page is cleared again when its first token arrives).
		return errors.Join(cu.MemsetD8Async(s.k, 0, codes, d.stream), cu.MemsetD8Async(s.v, 0, codes, d.stream),
			cu.MemsetD32Async(s.ks, 0, scales/4, d.stream), cu.MemsetD32Async(s.vs, 0, scales/4, d.stream))
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.bytes = 2*codes + 2*scales
	return s, nil
}

// pagedKV is one cache's storage on the device. Per (page, KV head): keys
// [P][D] codes, values [P/32][D][32] codes, scales in ks and vs. Every call runs
// under the device's lock, so the staging buffers are shared by calls.
type pagedKV struct {
	dev          *device
	cfg          backend.PagedConfig
	tc           tiles.PagedConfig
	k, v, ks, vs cu.DevicePtr
	owned        []cu.DevicePtr
	bytes        int64
	closed       bool
	poison       bool              // fill the outputs with poison.Bits before each call (tests)
	stage        map[string]pooled // device staging buffers by use, grown on demand
	runs         []int32           // Append's runs, host side
	waves        []int             // Append: the first run of each wave, and len(runs)
	lastWave     map[int32]int
	runsW        []int32
	varBlocks    []int32    // plan: a varlen batch's (sequence, row block) pairs
	side         sideStream // a varlen batch's split-KV launch beside its groups (paged_varlen.go)
	varlenInline bool       // benchmarks: that launch on the device's stream instead
	params       *pagedParams
	aparams      *appendParams
	readK, readV []fp8.E4M3
	ws, wsq      C.CUfunction        // the warp-specialized attention kernel, where the device has it for D (else nil: the cp.async kernel), and its entry with units drawn at run time
	wsCfg        tiles.PagedWSConfig // its geometry (zero where ws is nil)
	useWS        bool                // plan chose the warp-specialized kernel for the call
	wsDynamic    bool                // plan: the warp-specialized kernel has more units than blocks (its ticket; kernels/paged.cu, UnitQueue)
	perSM        int                 // attention blocks an SM holds (pagedOccupancy)
	smem         int                 // the attention kernel's dynamic shared memory a block
	pins         int                 // live graphs that read the cache (Close fails while not 0); under the device's lock
	splits       int                 // benchmarks (BenchmarkPagedDecodeSplits): key splits forced; 0: splitKeys chooses
	wsSplits     int                 // benchmarks: the warp-specialized kernel forced, with this many splits
	wsBlocks     int                 // tests: the warp-specialized kernel forced, on at most this many blocks
	blocksPerSM  int                 // benchmarks: blocks an SM forced; 0: pagedOccupancy chooses
	prefillRows  int                 // tests and benchmarks: the query rows from which calls run on the prefill kernels (negative: never; 0: prefillRowsPerSM a multiprocessor)
	cc           int                 // the backend's compute capability for bestStage (0: the device's)
	inPlaceTiles bool                // tests and benchmarks: the paged prefill reads its tiles in place where the paged form takes it
	packed       bool                // tests and benchmarks: varlen FP8 calls run on the packed form where it takes them
	groups       bool                // tests: varlen FP8 calls run in groups beside the split-KV kernel, not on the packed form
	kMap         *tensorMap          // the paged form's map of the K pool (pagesMap); nil until its first call
}

func (s *pagedKV) Config() backend.PagedConfig { return s.cfg }

// Bytes is the pool's device memory (codes and scales; staging buffers for
// calls come from the device's pool and are not counted).
func (s *pagedKV) Bytes() int64 { return s.bytes }

// Close frees the pool's device memory once the work issued on it so far has
// completed, and returns the staging buffers to the device's pool.
func (s *pagedKV) Close() error {
	if s.closed {
		return fmt.Errorf("%w: the paged cache is closed", backend.ErrInvalid)
	}
	if s.dev.capturing() != nil {
		return errCapture("closing a paged cache")
	}
	return s.dev.do(func() error {
		if s.pins > 0 {
			return fmt.Errorf("%w: cuda: closing a paged cache that %d live graph(s) read: Close them first", backend.ErrInvalid, s.pins)
		}
		s.closed = true
		errs := []error{s.dev.stream.Synchronize()}
		if s.side.made {
			errs = append(errs, s.side.stream.Synchronize())
		}
		for _, p := range s.owned {
			errs = append(errs, s.dev.devFree(p))
		}
		var bufs []pooled
		for _, b := range s.stage {
			bufs = append(bufs, b)
		}
		if len(bufs) > 0 {
			errs = append(errs, s.dev.release(bufs))
		}
		if s.side.made {
			errs = append(errs, s.side.stream.Destroy(), cu.DestroyEvent(&s.side.fork), cu.DestroyEvent(&s.side.join))
			s.side = sideStream{}
		}
		s.owned, s.stage = nil, nil
		return errors.Join(errs...)
	})
}

func (s *pagedKV) errClosed() error {
	if s == nil || s.dev == nil {
		return fmt.Errorf("%w: cuda: a nil paged cache", backend.ErrInvalid)
	}
	if s.closed {
		return fmt.Errorf("%w: the paged cache is closed", backend.ErrInvalid)
	}
	return nil
}

// buf returns the device buffer for use, of at least n bytes, growing it
// (the old one goes back to the pool behind the stream). The caller is
// inside do.
func (s *pagedKV) buf(use string, n int64) (uint64, error) {
	if s.stage == nil {
		s.stage = map[string]pooled{}
	}
	n = max(n, 4)
	b, ok := s.stage[use]
	if !ok || b.size < n {
		if ok {
			if err := s.dev.release([]pooled{b}); err != nil {
				return 0, err
			}
		}
		p, size, err := s.dev.alloc(n)
		if err != nil {
			return 0, err
		}
		b = pooled{p, size}
		s.stage[use] = b
	}
	return uint64(b.p), nil
}

// put returns the device buffer for use holding a copy of src, the copy
// added to copies (for device.upload).
func (s *pagedKV) put(copies *[]hostCopy, use string, src []byte) (uint64, error) {
	p, err := s.buf(use, int64(len(src)))
	if err == nil {
		*copies = append(*copies, hostCopy{dev: cu.DevicePtr(p), host: src})
	}
	return p, err
}

// putJoined returns the device addresses of copies of srcs, one buffer for
// use holding them as the staging buffer lays them out (each piece
// aligned), their copies added to copies, each joined to the one before:
// device.upload moves them in one copy.
func (s *pagedKV) putJoined(copies *[]hostCopy, use string, srcs ...[]byte) ([]uint64, error) {
	n := 0
	for _, src := range srcs {
		n += alignUp(len(src))
	}
	p, err := s.buf(use, int64(n))
	if err != nil {
		return nil, err
	}
	at := make([]uint64, len(srcs))
	for i, src := range srcs {
		at[i] = p
		*copies = append(*copies, hostCopy{dev: cu.DevicePtr(p), host: src, joined: i > 0})
		p += uint64(alignUp(len(src)))
	}
	return at, nil
}

// Append implements backend.PagedKV: the tokens' rows go to the device, and
// the append kernel quantizes each run of consecutive slots of one page in
// order (runs that share a page go in successive launches, in order).
func (s *pagedKV) Append(a *backend.PagedAppend) error {
	if err := s.errClosed(); err != nil {
		return err
	}
	if err := a.Validate(s.cfg); err != nil {
		return err
	}
	s.planRuns(a)
	H, D := s.cfg.KVHeads, s.cfg.HeadDim
	bs, hs, rs := a.Layout.Strides(H, a.N, D)
	return s.dev.do(func() error {
		var copies []hostCopy
		var srcK, srcV uint64
		var err error
		if a.KBuf != nil {
			if srcK, srcV, err = s.checkDevice(a); err != nil {
				return err
			}
		} else {
			if srcK, err = s.put(&copies, "srcK", bytesOf(a.K)); err != nil {
				return err
			}
			if srcV, err = s.put(&copies, "srcV", bytesOf(a.V)); err != nil {
				return err
			}
		}
		runs, err := s.put(&copies, "runs", bytesOf(s.runsW))
		if err != nil {
			return err
		}
		if err := s.dev.upload(copies); err != nil {
			return err
		}
		if s.aparams == nil {
			s.aparams = new(appendParams)
		}
		for w := 0; w+1 < len(s.waves); w++ {
			first, end := s.waves[w], s.waves[w+1]
			*s.aparams = appendParams{K: uint64(s.k), V: uint64(s.v), KScale: uint64(s.ks), VScale: uint64(s.vs),
				SrcK: srcK, SrcV: srcV, Runs: runs + uint64(20*first),
				BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs),
				Hkv: int32(H), D: int32(D), PageSize: int32(s.cfg.PageSize), NRuns: int32(end - first)}
			if err := launchStruct(s.dev.paged.append, end-first, H, 2, 128, 0, s.dev.stream, unsafe.Pointer(s.aparams)); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkDevice checks the keys and values of an append from device buffers
// on the device (fp8attn_paged_check) and waits for its verdict, so that a
// non-finite value is refused before anything is written, as the host's
// Validate refuses it for host slices. It returns the buffers' addresses.
// The caller is inside do.
func (s *pagedKV) checkDevice(a *backend.PagedAppend) (srcK, srcV uint64, err error) {
	bufs, err := ours(a.KBuf, a.VBuf)
	if err != nil {
		return 0, 0, err
	}
	n := int64(a.B) * int64(a.N) * int64(s.cfg.KVHeads) * int64(s.cfg.HeadDim)
	for i, b := range bufs {
		if err := b.fits(s.dev, 4*n, [...]string{"keys", "values"}[i]); err != nil {
			return 0, 0, err
		}
	}
	flag, err := s.buf("bad", 4)
	if err != nil {
		return 0, 0, err
	}
	cp := &checkParams{K: uint64(bufs[0].buf.p), V: uint64(bufs[1].buf.p), Bad: flag, N: n}
	blocks := int(min((n+checkThreads-1)/checkThreads, int64(4*s.dev.SMs)))
	var bad [1]int32
	if err := errors.Join(cu.MemsetD32Async(cu.DevicePtr(flag), 0, 1, s.dev.stream),
		launchStruct(s.dev.paged.check, blocks, 1, 1, checkThreads, 0, s.dev.stream, unsafe.Pointer(cp))); err != nil {
		return 0, 0, err
	}
	if err := s.dev.download([]hostCopy{{dev: cu.DevicePtr(flag), host: bytesOf(bad[:])}}); err != nil {
		return 0, 0, err
	}
	if bad[0] != 0 {
		return 0, 0, fmt.Errorf("%w: the keys or values hold NaN or ±Inf; the cache holds finite values only", backend.ErrInvalid)
	}
	return cp.K, cp.V, nil
}

// checkThreads is fp8attn_paged_check's block size (CHECK_THREADS).
const checkThreads = 256

// stageInputs uploads p's queries, lengths and block table (unless
// p.Tables holds the last two on the device) and reserves the output, LSE
// and partial buffers. Inside a graph capture the queries and outputs must
// be device buffers (pinned to the graph), the lengths and block table
// must be in p.Tables (which the caller keeps current: the graph copies
// nothing from the host), and the scratch buffers are the graph's own, so
// that the staging buffers of later calls cannot take them over. The
// extra bytes, if any, go up in the same copy as the tables (outside a
// capture), and the address returned is theirs. The caller is inside do,
// after plan.
func (s *pagedKV) stageInputs(p *backend.PagedProblem, extra []byte) (uint64, error) {
	c := s.dev.capturing()
	if c != nil && p.QBuf == nil {
		return 0, errCapture("a paged attention on host-memory queries")
	}
	if c != nil && p.Tables == nil {
		return 0, errCapture("a paged attention on host-memory lengths and block table (PagedProblem.Tables)")
	}
	if c != nil && p.QStarts != nil {
		return 0, errCapture("a varlen paged attention")
	}
	var copies []hostCopy
	// scratch reserves n bytes for use; in gives use a copy of host.
	scratch := func(use string, n int64) (uint64, error) {
		if c != nil {
			return s.dev.own(c, n)
		}
		return s.buf(use, n)
	}
	in := func(use string, host []byte) (uint64, error) { return s.put(&copies, use, host) }
	pp := s.params
	var err error
	var bufs []*buffer
	if p.QBuf != nil {
		if bufs, err = ours(p.QBuf, p.OutBuf, p.LSEBuf); err != nil {
			return 0, err
		}
		for _, b := range bufs {
			if b != nil && (b.dev != s.dev || b.buf.p == 0) {
				return 0, fmt.Errorf("%w: cuda: a freed buffer, or one of another device", backend.ErrInvalid)
			}
		}
		pp.Q = uint64(bufs[0].buf.p)
	} else if pp.Q, err = in("q", bytesOf(p.Q)); err != nil {
		return 0, err
	}
	// The lengths and block table (unless Tables keeps them), then a
	// varlen batch's query starts and blocks: one copy.
	var joined [][]byte
	if p.Tables != nil {
		t, ok := p.Tables.(*pagedTables)
		if !ok || t.dev != s.dev || t.buf.p == 0 || t.b != p.B || t.per != p.PagesPerSeq {
			return 0, fmt.Errorf("%w: cuda: tables not made by this device's NewTables for %d sequences of %d pages, or freed", backend.ErrInvalid, p.B, p.PagesPerSeq)
		}
		pp.SeqLens, pp.BlockTable = t.addrs()
	} else {
		joined = append(joined, bytesOf(p.SeqLens), bytesOf(p.BlockTable))
	}
	if p.QStarts != nil {
		joined = append(joined, bytesOf(p.QStarts), bytesOf(s.varBlocks))
	}
	if len(extra) > 0 {
		joined = append(joined, extra)
	}
	pp.QStarts, pp.VarBlocks = 0, 0
	var extraAt uint64
	if len(joined) > 0 {
		at, err := s.putJoined(&copies, "tables", joined...)
		if err != nil {
			return 0, err
		}
		if p.Tables == nil {
			pp.SeqLens, pp.BlockTable, at = at[0], at[1], at[2:]
		}
		if p.QStarts != nil {
			pp.QStarts, pp.VarBlocks, at = at[0], at[1], at[2:]
		}
		if len(extra) > 0 {
			extraAt = at[0]
		}
	}
	pp.Sinks = 0
	if p.Sinks != nil {
		var kept bool
		if pp.Sinks, kept, err = s.dev.sinksOn(p.Sinks, c != nil); err != nil {
			return 0, err
		}
		if !kept {
			if pp.Sinks, err = s.put(&copies, "sinks", bytesOf(p.Sinks)); err != nil {
				return 0, err
			}
		}
	}
	nq := int64(p.Rows()) * int64(p.Hq) * int64(p.D)
	switch {
	case bufs != nil:
		pp.Out = uint64(bufs[1].buf.p)
	default:
		if pp.Out, err = scratch("out", 4*nq); err != nil {
			return 0, err
		}
	}
	switch {
	case bufs != nil && bufs[2] != nil:
		pp.LSE = uint64(bufs[2].buf.p)
	default:
		if pp.LSE, err = scratch("lse", 4*int64(p.Rows())*int64(p.Hq)); err != nil {
			return 0, err
		}
	}
	// The warp-specialized kernel's words, 0 between launches: a counter of
	// finished splits per item, then the ticket its blocks draw units from.
	pp.Counters, pp.Ticket = 0, 0
	if items := p.B * p.Hkv * int(pp.RowBlocks); s.useWS && (pp.Splits > 1 || s.wsDynamic) {
		words, err := s.dev.zeroWords(items + 1)
		if err != nil {
			return 0, err
		}
		if pp.Splits > 1 {
			pp.Counters = words
		}
		if s.wsDynamic {
			pp.Ticket = words + 4*uint64(items)
		}
	}
	if pp.Splits > 1 {
		parts := int64(s.items(p)) * int64(pp.Splits) * int64(s.tc.Rows)
		if pp.PartOut, err = scratch("partOut", 4*parts*int64(p.D)); err != nil {
			return 0, err
		}
		if pp.PartLSE, err = scratch("partLSE", 4*parts); err != nil {
			return 0, err
		}
	}
	if c != nil {
		c.caches = append(c.caches, s)
		return 0, nil
	}
	return extraAt, s.dev.upload(copies)
}

// launchAttention issues the attention kernel (and, after the cp.async
// kernel, the merge of its splits) on the stream.
func (s *pagedKV) launchAttention(gx, gy, gz int) error {
	return s.launchAttentionOn(s.dev.stream, gx, gy, gz)
}

// launchAttentionOn is launchAttention on stream st.
func (s *pagedKV) launchAttentionOn(st cu.Stream, gx, gy, gz int) error {
	pp := s.params
	f, threads, smem := s.dev.paged.attn[s.cfg.HeadDim], s.tc.Threads(), s.smem
	if pp.Softcap > 0 {
		f = s.dev.paged.attnCap[s.cfg.HeadDim]
	}
	if s.useWS {
		f, threads, smem = s.ws, s.wsCfg.Threads(), s.wsCfg.SharedBytes()
		if s.wsDynamic {
			f = s.wsq
		}
	}
	if err := launchStruct(f, gx, gy, gz, threads, smem, st, unsafe.Pointer(pp)); err != nil {
		return err
	}
	if pp.Splits > 1 && !s.useWS { // (the warp-specialized kernel merges its splits itself)
		gx, gy := int(pp.Hkv*pp.RowBlocks), int(pp.B)
		if pp.QStarts != 0 {
			gx, gy = int(pp.Hkv)*len(s.varBlocks)/2, 1
		}
		return launchStruct(s.dev.paged.merge, gx, gy, s.tc.Rows, 256, 0, st, unsafe.Pointer(pp))
	}
	return nil
}

// items is how many (sequence, KV head, row block) items p has, after
// plan: a varlen batch's are its sequences' own row blocks.
func (s *pagedKV) items(p *backend.PagedProblem) int {
	if p.QStarts != nil {
		return p.Hkv * len(s.varBlocks) / 2
	}
	return p.B * p.Hkv * int(s.params.RowBlocks)
}

// Attention implements backend.PagedKV.
func (s *pagedKV) Attention(p *backend.PagedProblem) error {
	if err := s.errClosed(); err != nil {
		return err
	}
	if err := p.Validate(s.cfg); err != nil {
		return err
	}
	return s.dev.do(func() error {
		if st := s.prefillStage(p); st != 0 {
			return s.prefill(p, st)
		}
		if s.packedTakes(p) {
			return s.packedCall(p)
		}
		if groups := s.varlenGroups(p); groups != nil {
			return s.varlen(p, groups)
		}
		gx, gy, gz := s.plan(p)
		if _, err := s.stageInputs(p, nil); err != nil {
			return err
		}
		if err := s.poisonOutputs(p); err != nil {
			return err
		}
		if err := s.launchAttention(gx, gy, gz); err != nil {
			return err
		}
		return s.downloadOutputs(p, nil)
	})
}

// poisonOutputs fills the call's outputs (stageInputs') with poison.Bits
// where the pagedKV poisons (tests).
func (s *pagedKV) poisonOutputs(p *backend.PagedProblem) error {
	if !s.poison {
		return nil
	}
	pp := s.params
	rows := int64(p.Rows()) * int64(p.Hq)
	return errors.Join(cu.MemsetD32Async(cu.DevicePtr(pp.Out), poison.Bits, rows*int64(p.D), s.dev.stream),
		cu.MemsetD32Async(cu.DevicePtr(pp.LSE), poison.Bits, rows, s.dev.stream))
}

// downloadOutputs copies the call's outputs (stageInputs') into p's host
// slices, and then more (the copies' host ends); outputs in device
// buffers stay there.
func (s *pagedKV) downloadOutputs(p *backend.PagedProblem, more []hostCopy) error {
	if p.QBuf != nil {
		return nil
	}
	copies := append([]hostCopy{{dev: cu.DevicePtr(s.params.Out), host: bytesOf(p.Out)}}, more...)
	if p.LSE != nil {
		copies = append(copies, hostCopy{dev: cu.DevicePtr(s.params.LSE), host: bytesOf(p.LSE)})
	}
	if err := s.dev.download(copies); err != nil {
		return fmt.Errorf("cuda: paged attention: %w", err)
	}
	return nil
}

// PagedTimes implements timing.PagedTimer.
func (s *pagedKV) PagedTimes(p *backend.PagedProblem, iters int) ([]float64, error) {
	if err := s.errClosed(); err != nil {
		return nil, err
	}
	if err := p.Validate(s.cfg); err != nil {
		return nil, err
	}
	var out []float64
	err := s.dev.do(func() error {
		if s.blocksPerSM > 0 {
			s.perSM, s.smem = pagedOccupancy(s.dev, s.tc, s.blocksPerSM)
		}
		gx, gy, gz := s.plan(p)
		if _, err := s.stageInputs(p, nil); err != nil {
			return err
		}
		var err error
		out, err = s.dev.timeCalls(iters, true, func() error { return s.launchAttention(gx, gy, gz) })
		return err
	})
	return out, err
}
