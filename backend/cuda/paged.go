//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cuda/kernels"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// The paged FP8 KV cache on the GPU (kernels/paged.cu): the pool of pages
// lives in device memory; Append quantizes new tokens into it on the device
// (bit for bit as the cpu backend does); Attention runs the split-KV kernel
// over the block table and merges the splits.

// pagedKernels are the paged module's kernels.
type pagedKernels struct {
	append, merge, check C.CUfunction
	attn                 map[int]C.CUfunction // the cp.async kernel, by head dim
	ws                   map[int]C.CUfunction // the warp-specialized kernel (sm_90a module only), by head dim
	wsq                  map[int]C.CUfunction // the same with units drawn at run time (a ticket), by head dim
}

// loadPaged loads the paged module: on compute capability 9.0 its sm_90a
// build (the embedded cubin, or the file FP8ATTN_PAGED_CUBIN names), which
// adds the warp-specialized attention kernel; elsewhere, or if the driver
// refuses the cubin, the compute_89 PTX (or the file FP8ATTN_PAGED_PTX
// names; with ampere, the compute_80 build, or FP8ATTN_PAGED_PTX80). It
// checks the parameter layouts and every attention kernel's geometry against
// internal/tiles, and raises the kernels' dynamic shared-memory limits. The
// caller holds the context current.
func (d *Device) loadPaged(ampere bool) error {
	env, embedded := "FP8ATTN_PAGED_PTX", kernels.PagedPTX
	if ampere {
		env, embedded = "FP8ATTN_PAGED_PTX80", kernels.PagedPTX80
	}
	loaded := false
	if d.ComputeCapability == 90 && !ampere && !forcePagedPTX {
		cubin, err := moduleImage("FP8ATTN_PAGED_CUBIN", string(kernels.PagedCubin))
		if err != nil {
			return err
		}
		if d.pmod, err = cu.LoadData(cubin); err == nil {
			loaded = true
		} else {
			d.pagedWSErr = fmt.Errorf("cuda: the sm_90a paged module did not load (%v); the cp.async kernel runs", err)
		}
	}
	if !loaded {
		ptx, err := moduleImage(env, embedded)
		if err != nil {
			return err
		}
		if d.pmod, err = cu.LoadData(ptx); err != nil {
			return fmt.Errorf("cuda: loading the paged-cache PTX: %w", err)
		}
	}
	if err := d.checkLayouts(d.pmod, pagedLayouts); err != nil {
		return err
	}
	fn := func(name string) (C.CUfunction, error) {
		f, err := d.pmod.Function(name)
		if err != nil {
			return nil, fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		return cFunction(f), nil
	}
	// config checks the geometry kernel name exports against want and
	// raises its shared-memory limit to smem.
	config := func(f C.CUfunction, name string, want []int, smem int) error {
		if err := d.checkExported(d.pmod, name+"_config", want...); err != nil {
			return err
		}
		return setMaxSharedMemory(f, smem)
	}
	k := pagedKernels{attn: map[int]C.CUfunction{}, ws: map[int]C.CUfunction{}, wsq: map[int]C.CUfunction{}}
	var err error
	if k.append, err = fn("fp8attn_paged_append"); err != nil {
		return err
	}
	if k.merge, err = fn("fp8attn_paged_merge"); err != nil {
		return err
	}
	if k.check, err = fn("fp8attn_paged_check"); err != nil {
		return err
	}
	for _, hd := range tiles.PagedHeadDims {
		name := fmt.Sprintf("fp8attn_paged_d%d", hd)
		f, err := fn(name)
		if err != nil {
			return err
		}
		cfg, _ := tiles.Paged(hd)
		want := []int{cfg.Rows, cfg.Keys, cfg.Warps, cfg.Ring, cfg.SharedBytes()}
		if err := config(f, name, want, max(cfg.SharedBytes(), d.SharedPerSM/2)); err != nil { // room for pagedOccupancy's padding
			return err
		}
		k.attn[hd] = f
	}
	if loaded {
		for _, hd := range tiles.PagedWSHeadDims {
			name := fmt.Sprintf("fp8attn_paged_ws_d%d", hd) // (its _config serves both entries)
			cfg, _ := tiles.PagedWS(hd)
			want := []int{cfg.Rows, cfg.Keys, cfg.Consumers, cfg.Producers, cfg.Ring, cfg.SharedBytes()}
			for _, e := range []struct {
				entry string
				m     map[int]C.CUfunction
			}{{name, k.ws}, {fmt.Sprintf("fp8attn_paged_wsq_d%d", hd), k.wsq}} {
				f, err := fn(e.entry)
				if err != nil {
					return err
				}
				if err := config(f, name, want, cfg.SharedBytes()); err != nil {
					return err
				}
				e.m[hd] = f
			}
		}
		// The sm_90a build's entry points keep kernels/pdl.cuh's contract.
		for _, f := range []C.CUfunction{k.append, k.merge, k.check} {
			markPDL(f)
		}
		for _, m := range []map[int]C.CUfunction{k.attn, k.ws, k.wsq} {
			for _, f := range m {
				markPDL(f)
			}
		}
	}
	d.paged = k
	return nil
}

// NewPagedKV implements backend.PagedBackend: a paged cache in the memory of
// device 0. Head dims are tiles.PagedHeadDims and page sizes multiples of
// tiles.PagedPageMultiple; others get ErrUnsupported.
func (b *Backend) NewPagedKV(c backend.PagedConfig) (backend.PagedKV, error) {
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
	d, err := OpenDevice(0)
	if err != nil {
		return nil, err
	}
	if d.capturing() != nil {
		return nil, errCapture("making a paged cache")
	}
	s := &pagedKV{dev: d, cfg: c, tc: tc, poison: b.poison, wsBlocks: b.pagedWSBlocks}
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
	dev          *Device
	cfg          backend.PagedConfig
	tc           tiles.PagedConfig
	k, v, ks, vs cu.DevicePtr
	owned        []cu.DevicePtr
	bytes        int64
	closed       bool
	poison       bool              // fill the outputs with backend.PoisonBits before each call (tests)
	stage        map[string]pooled // device staging buffers by use, grown on demand
	runs         []int32           // Append's runs, host side
	waves        []int             // Append: the first run of each wave, and len(runs)
	lastWave     map[int32]int
	runsW        []int32
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
}

// pagedWarpsPerSM is how many warps of the attention kernel an SM runs at
// once. Measured on the H200 at D=128 (BenchmarkPagedDecodeSplits, docs/PERF.md):
// an SM reads the cache as fast with 8 warps (two blocks) as with 12 (three,
// all that its shared memory holds), and at two blocks an SM the grid fills
// whole waves more often: B64 Hq32 Hkv8 Sk2048 took 81 µs at two blocks an SM
// against 91 at three.
const pagedWarpsPerSM = 8

// pagedOccupancy returns how many attention blocks of tiles tc an SM of d
// holds (want, if positive; else pagedWarpsPerSM's worth, at most what fits),
// and the dynamic shared memory a block asks for so that no more fit.
func pagedOccupancy(d *Device, tc tiles.PagedConfig, want int) (perSM, smem int) {
	const reserved = 1024 + 512 // the driver's reservation and the kernel's static shared memory, a block
	fit := max(1, d.SharedPerSM/(tc.SharedBytes()+reserved))
	if want <= 0 {
		want = max(1, pagedWarpsPerSM/tc.Warps)
	}
	perSM, smem = min(fit, want), tc.SharedBytes()
	if perSM < fit {
		smem = max(smem, d.SharedPerSM/(perSM+1)) // perSM+1 blocks would exceed the SM
	}
	return perSM, smem
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
		s.owned, s.stage = nil, nil
		return errors.Join(errs...)
	})
}

func (s *pagedKV) errClosed() error {
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
// added to copies (for Device.upload).
func (s *pagedKV) put(copies *[]hostCopy, use string, src []byte) (uint64, error) {
	p, err := s.buf(use, int64(len(src)))
	if err == nil {
		*copies = append(*copies, hostCopy{cu.DevicePtr(p), src})
	}
	return p, err
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
	if err := s.dev.download([]hostCopy{{cu.DevicePtr(flag), bytesOf(bad[:])}}); err != nil {
		return 0, 0, err
	}
	if bad[0] != 0 {
		return 0, 0, fmt.Errorf("%w: the keys or values hold NaN or ±Inf; the cache holds finite values only", backend.ErrInvalid)
	}
	return cp.K, cp.V, nil
}

// checkThreads is fp8attn_paged_check's block size (CHECK_THREADS).
const checkThreads = 256

// planRuns splits a's tokens into runs (consecutive tokens of one batch
// entry going to consecutive slots of one page), orders them into waves in
// which no two runs share a page (a run goes one wave after the last run
// before it on its page), and writes them, wave after wave, to s.runsW with
// the wave boundaries in s.waves.
func (s *pagedKV) planRuns(a *backend.PagedAppend) {
	s.runs = s.runs[:0]
	for b := range a.B {
		for t := range a.N {
			pg, sl := a.Page[b*a.N+t], a.Slot[b*a.N+t]
			if n := len(s.runs); t > 0 && s.runs[n-2] == pg && s.runs[n-1]+s.runs[n-3] == sl {
				s.runs[n-3]++
				continue
			}
			s.runs = append(s.runs, int32(b), int32(t), 1, pg, sl)
		}
	}
	nr := len(s.runs) / 5
	if s.lastWave == nil {
		s.lastWave = map[int32]int{}
	}
	clear(s.lastWave)
	wave := make([]int, nr) // small: one entry per run
	waves := 1
	for r := range nr {
		pg := s.runs[5*r+3]
		if w, ok := s.lastWave[pg]; ok {
			wave[r] = w + 1
		}
		s.lastWave[pg] = wave[r]
		waves = max(waves, wave[r]+1)
	}
	s.runsW = freelist.Grow(s.runsW, len(s.runs))[:0]
	s.waves = s.waves[:0]
	for w := range waves {
		s.waves = append(s.waves, len(s.runsW)/5)
		for r := range nr {
			if wave[r] == w {
				s.runsW = append(s.runsW, s.runs[5*r:5*r+5]...)
			}
		}
	}
	s.waves = append(s.waves, nr)
}

// plan fills s.params for p (everything but the device addresses of the
// call's staging buffers) and returns the grid.
func (s *pagedKV) plan(p *backend.PagedProblem) (gx, gy, gz int) {
	g := p.Hq / p.Hkv
	rowBlocks := (g*p.Sq + s.tc.Rows - 1) / s.tc.Rows
	keys := s.tc.Keys
	maxTiles := max(1, (p.MaxSeqLen+keys-1)/keys) // a graph's bound (0 otherwise)
	for b := range p.B {
		maxTiles = max(maxTiles, (int(p.SeqLens[b])+keys-1)/keys)
	}
	var splits, perSplit int
	items := p.B * p.Hkv * rowBlocks
	s.useWS = false
	if s.wsCfg.Consumers > 0 && s.splits == 0 { // the device has the warp-specialized kernel for D
		splits, perSplit = s.splitKeysWS(items, maxTiles)
		s.useWS = items*splits <= wsMaxUnitsPerBlock*s.dev.SMs || s.wsBlocks > 0
		if n := min(s.wsSplits, maxTiles, maxSplits); n > 0 { // forced by a benchmark
			perSplit = (maxTiles + n - 1) / n
			splits, s.useWS = (maxTiles+perSplit-1)/perSplit, true
		}
	}
	switch n := min(s.splits, maxTiles, maxSplits); {
	case n > 0: // forced by a benchmark (the cp.async kernel)
		perSplit = (maxTiles + n - 1) / n
		splits = (maxTiles + perSplit - 1) / perSplit
	case !s.useWS:
		splits, perSplit = s.splitKeys(items, maxTiles)
	}
	bs, hs, rs := p.Layout.Strides(p.Hq, p.Sq, p.D)
	mask := int32(0)
	if p.Mask == backend.CausalLowerRight {
		mask = 2
	}
	if s.params == nil {
		s.params = new(pagedParams)
	}
	*s.params = pagedParams{K: uint64(s.k), V: uint64(s.v), KScale: uint64(s.ks), VScale: uint64(s.vs),
		BatchStride: int64(bs), HeadStride: int64(hs), RowStride: int64(rs),
		B: int32(p.B), Hq: int32(p.Hq), Hkv: int32(p.Hkv), Sq: int32(p.Sq), D: int32(p.D),
		PageSize: int32(s.cfg.PageSize), PagesPerSeq: int32(p.PagesPerSeq), Mask: mask,
		RowBlocks: int32(rowBlocks), Splits: int32(splits), TilesPerSplit: int32(perSplit),
		ScoreScale: float32(float64(p.Scale) * math.Log2E)}
	s.wsDynamic = false
	if s.useWS { // one block an SM walks the units
		blocks := min(items*splits, s.dev.SMs)
		if s.wsBlocks > 0 {
			blocks = min(items*splits, s.wsBlocks)
		}
		s.params.WSSlots = int32(wsSlots(s.wsCfg, items*splits, blocks))
		s.wsDynamic = items*splits > blocks // blocks draw their later units at run time (stageInputs: the ticket)
		return blocks, 1, 1
	}
	return splits, p.Hkv * rowBlocks, p.B
}

// maxSplits bounds the key splits of a call (the merge keeps a weight a
// split in shared memory).
const maxSplits = 256

// splitKeys chooses how many blocks share the tiles of one of items (a
// sequence's KV head and row block) of up to maxTiles tiles: the count that
// minimizes a cost in a warp's tile-times, waves·(tiles a warp + 2) for the
// blocks (the 2: a block's fixed work, its query load and its warps' merge),
// plus, with splits, the merge's traffic (its partial rows, written and
// read) and its launch. A wave is every block the GPU holds at once: the SMs
// times s.perSM. Each warp gets at least two tiles.
func (s *pagedKV) splitKeys(items, maxTiles int) (splits, perSplit int) {
	slots := s.perSM * s.dev.SMs
	best := math.Inf(1)
	for n := 1; n <= min(maxTiles, maxSplits); n++ {
		per := (maxTiles + n - 1) / n
		if n > 1 && per < 2*s.tc.Warps {
			break
		}
		blocks := items * n
		cost := float64((blocks+slots-1)/slots) * float64((per+s.tc.Warps-1)/s.tc.Warps+2)
		if n > 1 {
			cost += float64(blocks)/float64(slots) + 2
		}
		if cost < best {
			best, splits, perSplit = cost, n, per
		}
	}
	return splits, perSplit
}

// wsSlots is how many of its ring's slots the warp-specialized kernel uses
// for a call of units units on blocks blocks: two a consumer warp where each
// block has one unit, the whole ring otherwise. Fewer tiles in flight wait
// less in the memory's queues (the ring need only cover the memory's
// latency), while a block with several units needs the whole ring to stream
// on through its consumers' pause between units. Measured on the H200
// (docs/PERF.md, v11): 16 slots against 24 at D=128, B8 Hq32 Hkv8 Sk8192
// 38.5-39.1 µs against 40.1-40.3 and B1 Sk32768 24.6 against 25.2, one unit
// a block; B64 Sk2048 (four a block) 78.5 against 75.1-75.5.
func wsSlots(c tiles.PagedWSConfig, units, blocks int) int {
	if units <= blocks {
		return min(c.Ring, wsSlotsPerWarpOneUnit*c.Consumers)
	}
	return c.Ring
}

// wsSlotsPerWarpOneUnit: see wsSlots.
const wsSlotsPerWarpOneUnit = 2

// wsMaxUnitsPerBlock: a call whose units would give a block more than this
// many runs the cp.async kernel instead. The consumers of a block meet at
// the end of every unit; on B64 Hq32 Hkv8 Sk2048 (3.9 units a block) the
// warp-specialized kernel v10 took 76.5-77.0 µs against the cp.async
// kernel's 74.8-75.0, v12 (transposed units) 73.0-74.8 against 75.9-76.0 in
// the same runs (docs/PERF.md, v12).
const wsMaxUnitsPerBlock = 4

// Costs of the warp-specialized kernel's plan, in tiles' time: a unit's
// fixed work (its query load and its warps' merge, while the producer goes
// on streaming) and the merge of an item's splits by its last unit.
const (
	wsUnitTiles  = 4
	wsMergeTiles = 4
)

// splitKeysWS chooses the key splits for the warp-specialized kernel: one
// block an SM walks the items·n units round robin, so the slowest block has
// ceil(units/SMs) units of ceil(maxTiles/n) tiles and a unit's fixed work
// each, and n > 1 adds the merge; a split has a tile for every consumer
// warp. The count with the least cost wins (the
// fewest splits on a tie).
func (s *pagedKV) splitKeysWS(items, maxTiles int) (splits, perSplit int) {
	best := math.MaxInt
	for n := 1; n <= min(maxTiles, maxSplits); n++ {
		per := (maxTiles + n - 1) / n
		if n > 1 && per < s.wsCfg.Consumers {
			break // a split for every consumer warp at least
		}
		cost := (items*n + s.dev.SMs - 1) / s.dev.SMs * (per + wsUnitTiles)
		if n > 1 {
			cost += wsMergeTiles
		}
		if cost < best {
			best, splits, perSplit = cost, n, per
		}
	}
	return splits, perSplit
}

// stageInputs uploads p's queries, lengths and block table and reserves the
// output, LSE and partial buffers. Inside a graph capture the queries and
// outputs must be device buffers (pinned to the graph), and the other
// buffers are the graph's own: the lengths and block table are uploaded
// from p's slices before every replay (they must stay valid as long as the
// graph), and the staging buffers of later calls cannot take them over. The
// caller is inside do, after plan.
func (s *pagedKV) stageInputs(p *backend.PagedProblem) error {
	c := s.dev.capturing()
	if c != nil && p.QBuf == nil {
		return errCapture("a paged attention on host-memory queries")
	}
	var copies []hostCopy
	// scratch reserves n bytes for use; in gives use a copy of host.
	scratch := func(use string, n int64) (uint64, error) {
		if c != nil {
			return s.dev.own(c, n)
		}
		return s.buf(use, n)
	}
	in := func(use string, host []byte) (uint64, error) {
		if c == nil {
			return s.put(&copies, use, host)
		}
		ptr, err := s.dev.own(c, int64(len(host)))
		if err == nil {
			c.uploads = append(c.uploads, hostCopy{cu.DevicePtr(ptr), host})
		}
		return ptr, err
	}
	pp := s.params
	var err error
	var bufs []*Buffer
	if p.QBuf != nil {
		if bufs, err = ours(p.QBuf, p.OutBuf, p.LSEBuf); err != nil {
			return err
		}
		for _, b := range bufs {
			if b != nil && (b.dev != s.dev || b.buf.p == 0) {
				return fmt.Errorf("%w: cuda: a freed buffer, or one of another device", backend.ErrInvalid)
			}
		}
		pp.Q = uint64(bufs[0].buf.p)
	} else if pp.Q, err = in("q", bytesOf(p.Q)); err != nil {
		return err
	}
	if pp.SeqLens, err = in("lens", bytesOf(p.SeqLens)); err != nil {
		return err
	}
	if pp.BlockTable, err = in("table", bytesOf(p.BlockTable)); err != nil {
		return err
	}
	nq := int64(p.B) * int64(p.Hq) * int64(p.Sq) * int64(p.D)
	switch {
	case bufs != nil:
		pp.Out = uint64(bufs[1].buf.p)
	default:
		if pp.Out, err = scratch("out", 4*nq); err != nil {
			return err
		}
	}
	switch {
	case bufs != nil && bufs[2] != nil:
		pp.LSE = uint64(bufs[2].buf.p)
	default:
		if pp.LSE, err = scratch("lse", 4*int64(p.B*p.Hq*p.Sq)); err != nil {
			return err
		}
	}
	// The warp-specialized kernel's words, 0 between launches: a counter of
	// finished splits per item, then the ticket its blocks draw units from.
	pp.Counters, pp.Ticket = 0, 0
	if items := p.B * p.Hkv * int(pp.RowBlocks); s.useWS && (pp.Splits > 1 || s.wsDynamic) {
		words, err := s.dev.zeroWords(items + 1)
		if err != nil {
			return err
		}
		if pp.Splits > 1 {
			pp.Counters = words
		}
		if s.wsDynamic {
			pp.Ticket = words + 4*uint64(items)
		}
	}
	if pp.Splits > 1 {
		parts := int64(p.B) * int64(p.Hkv) * int64(pp.RowBlocks) * int64(pp.Splits) * int64(s.tc.Rows)
		if pp.PartOut, err = scratch("partOut", 4*parts*int64(p.D)); err != nil {
			return err
		}
		if pp.PartLSE, err = scratch("partLSE", 4*parts); err != nil {
			return err
		}
	}
	if c != nil {
		c.caches = append(c.caches, s)
		return nil
	}
	return s.dev.upload(copies)
}

// launchAttention issues the attention kernel (and, after the cp.async
// kernel, the merge of its splits) on the stream.
func (s *pagedKV) launchAttention(gx, gy, gz int) error {
	pp := s.params
	f, threads, smem := s.dev.paged.attn[s.cfg.HeadDim], s.tc.Threads(), s.smem
	if s.useWS {
		f, threads, smem = s.ws, s.wsCfg.Threads(), s.wsCfg.SharedBytes()
		if s.wsDynamic {
			f = s.wsq
		}
	}
	if err := launchStruct(f, gx, gy, gz, threads, smem, s.dev.stream, unsafe.Pointer(pp)); err != nil {
		return err
	}
	if pp.Splits > 1 && !s.useWS { // (the warp-specialized kernel merges its splits itself)
		return launchStruct(s.dev.paged.merge, int(pp.Hkv*pp.RowBlocks), int(pp.B), s.tc.Rows, 256, 0, s.dev.stream, unsafe.Pointer(pp))
	}
	return nil
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
		gx, gy, gz := s.plan(p)
		if err := s.stageInputs(p); err != nil {
			return err
		}
		if s.poison {
			pp := s.params
			if err := errors.Join(cu.MemsetD32Async(cu.DevicePtr(pp.Out), backend.PoisonBits, int64(p.B*p.Hq*p.Sq*p.D), s.dev.stream),
				cu.MemsetD32Async(cu.DevicePtr(pp.LSE), backend.PoisonBits, int64(p.B*p.Hq*p.Sq), s.dev.stream)); err != nil {
				return err
			}
		}
		if err := s.launchAttention(gx, gy, gz); err != nil {
			return err
		}
		if p.QBuf != nil { // outputs stay on the device
			return nil
		}
		copies := []hostCopy{{cu.DevicePtr(s.params.Out), bytesOf(p.Out)}}
		if p.LSE != nil {
			copies = append(copies, hostCopy{cu.DevicePtr(s.params.LSE), bytesOf(p.LSE)})
		}
		if err := s.dev.download(copies); err != nil {
			return fmt.Errorf("cuda: paged attention: %w", err)
		}
		return nil
	})
}

// PagedTimes implements backend.PagedTimer.
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
		if err := s.stageInputs(p); err != nil {
			return err
		}
		var err error
		out, err = s.dev.timeCalls(iters, true, func() error { return s.launchAttention(gx, gy, gz) })
		return err
	})
	return out, err
}

// ReadPage implements backend.PagedReader.
func (s *pagedKV) ReadPage(page, head int, k, v []fp8.E4M3) (kScale, vScale float32, err error) {
	if err := s.errClosed(); err != nil {
		return 0, 0, err
	}
	c := s.cfg
	n := c.PageSize * c.HeadDim
	if page < 0 || page >= c.Pages || head < 0 || head >= c.KVHeads || len(k) != n || len(v) != n {
		return 0, 0, fmt.Errorf("%w: ReadPage(%d, %d) into %d and %d codes (pool of %d pages, %d heads, %d×%d a block)",
			backend.ErrInvalid, page, head, len(k), len(v), c.Pages, c.KVHeads, c.PageSize, c.HeadDim)
	}
	s.readV = freelist.Grow(s.readV, n)
	s.readK = freelist.Grow(s.readK, n)
	blk := int64(page*c.KVHeads+head) * int64(n)
	sc := int64(4 * (page*c.KVHeads + head))
	scales := make([]float32, 2) // (cgo: not inside a struct that holds Go pointers)
	if s.dev.capturing() != nil {
		return 0, 0, errCapture("reading a page")
	}
	err = s.dev.do(func() error {
		errs := []error{
			cu.MemcpyDtoHAsync(unsafe.Pointer(&s.readK[0]), s.k+cu.DevicePtr(blk), int64(n), s.dev.stream),
			cu.MemcpyDtoHAsync(unsafe.Pointer(&s.readV[0]), s.v+cu.DevicePtr(blk), int64(n), s.dev.stream),
			cu.MemcpyDtoHAsync(unsafe.Pointer(&scales[0]), s.ks+cu.DevicePtr(sc), 4, s.dev.stream),
			cu.MemcpyDtoHAsync(unsafe.Pointer(&scales[1]), s.vs+cu.DevicePtr(sc), 4, s.dev.stream),
			s.dev.stream.Synchronize(),
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: ReadPage: %w", err)
	}
	D, P := c.HeadDim, c.PageSize
	for j := range P {
		for d := range D {
			k[j*D+d] = s.readK[pagedKeyIndex(j, d, D)]
			v[j*D+d] = s.readV[pagedValueIndex(j, d, D)]
		}
	}
	return scales[0], scales[1], nil
}

// The cache's layout within a (page, KV head) block (kernels/paged.cu: the
// tile layout both attention kernels read): pagedKeyIndex is the offset of
// key (slot, d) and pagedValueIndex of value (slot, d). In each 32-key tile,
// key k's 16-byte chunk c sits at chunk c ^ pagedKeySwizzle(k), and values
// are [D][32] with the 16-key halves of row d swapped when bit 2 of d is set.
func pagedKeyIndex(slot, d, D int) int {
	return slot*D + 16*((d>>4)^pagedKeySwizzle(slot&31, D/16)) + d&15
}

func pagedValueIndex(slot, d, D int) int {
	return (slot>>5)*D*32 + d*32 + 16*(((slot>>4)&1)^((d>>2)&1)) + slot&15
}

// pagedKeySwizzle is paged.cu's k_swizzle: key k's ldmatrix row (mod 8)
// scaled to the largest power of two, at most 8, dividing nc.
func pagedKeySwizzle(k, nc int) int {
	row := k&16 + 8*((k>>1)&1) + 2*((k&15)>>2) + k&1
	return (row & 7) * min(nc&-nc, 8) >> 3
}
