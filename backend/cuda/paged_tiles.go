//go:build cuda

package cuda

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

// The paged form of stage 9 (fp8attn_stage9tp_d<pagedTilesHeadDim>,
// kernels/hopper/paged.cuh) reads a paged prefill's K and V from the
// cache's pages where they are, a tile's scales its pages', instead of
// from the tensors and the V image the inputs launch gathers, and encodes
// the caller's float32 queries itself, a scale a row: the call is that one
// launch (docs/design/paged-decode.md, "One launch for an FP8 varlen
// step").

// pagedTilesHeadDim is the head dim the Hopper module builds the paged
// form at (attention_sm90a.cu's HOPPER_PAGED), and pagedTilesPage the
// cache pages it reads (hopper/paged.cuh's PAGE tokens: two a tile).
const (
	pagedTilesHeadDim = 128
	pagedTilesPage    = 64
)

// pagedTilesLaunches counts the paged form's launches (tests: which path
// a call took).
var pagedTilesLaunches atomic.Int64

// pagedTiles is where the paged form reads a call's inputs: the cache's
// K pool through kmap (pagesMap), its V pool and both pools' scales, the
// call's block table and float32 queries (device addresses), the pages a
// sequence and the pool's KV heads.
type pagedTiles struct {
	kmap                *tensorMap
	v, ks, vs, table, q uint64
	perSeq, heads       int64
}

// pagedTakes is whether the paged form runs r's next launch, a paged
// prefill's on stage 9 over cache pages of pageSize tokens: the head dim it
// is built at, no softcap, and a call that launchTensors would give the
// plain tiled grid (not one tile, a key split or the narrow blocks, which
// read the gathered tensors and keep their own speed).
func (r *resident) pagedTakes(pageSize int) bool {
	s := r.shape
	if s.D != pagedTilesHeadDim || pageSize != pagedTilesPage || s.Softcap != 0 || r.dev.hopperErr != nil {
		return false
	}
	fn, one := r.tensorEntry()
	k := r.kernels()
	if fn == nil || one || k.attnTensorsPaged == nil {
		return false
	}
	gx, gy, gz, _ := k.cfg.Launch(s.B, s.Hq, s.Sq, s.Sk)
	// (The head start reads no V image the caller wrote: a gathered
	// prefill, which writes it, never takes it.)
	return r.dev.keySplits(k, &s, gx*gy*gz) <= 1 && !r.dev.narrowTakes(k, &s)
}

// launchPaged launches the paged form over pg (pagedTakes said so; the
// caller is inside do).
func (r *resident) launchPaged(pg *pagedTiles) error {
	if !r.pagedTakes(pagedTilesPage) {
		return errors.New("cuda: the paged form asked of a launch it does not take")
	}
	k := r.kernels()
	tl, err := r.tensorLaunch(k)
	if err != nil {
		return err
	}
	s := r.shape
	gx, gy, gz, threads := k.cfg.Launch(s.B, s.Hq, s.Sq, s.Sk)
	p := &tl.P
	p.Splits = 0
	kmap := p.K
	p.K, p.VPages, p.KPageScale, p.VPageScale, p.BlockTable = *pg.kmap, pg.v, pg.ks, pg.vs, pg.table
	p.PagesPerSeq, p.PageKVHeads, p.QRows = pg.perSeq, pg.heads, pg.q
	err = launchStruct(k.attnTensorsPaged, gx, gy, gz, threads, k.cfg.PagedSharedBytes(), r.dev.stream, unsafe.Pointer(p))
	if err == nil {
		pagedTilesLaunches.Add(1)
	}
	// (The driver has copied the parameters: the resident's later tensor
	// launches read K's tensor and no pages.)
	p.K, p.VPages, p.KPageScale, p.VPageScale, p.BlockTable, p.PagesPerSeq, p.PageKVHeads, p.QRows = kmap, 0, 0, 0, 0, 0, 0, 0
	return err
}

// pagesMap returns the map of the cache's K pool the paged form reads
// (encodePages), encoded on its first use and kept: the pool is fixed.
func (s *pagedKV) pagesMap() (*tensorMap, error) {
	if s.kMap == nil {
		if s.cfg.HeadDim != pagedTilesHeadDim || s.cfg.PageSize != pagedTilesPage {
			return nil, errors.New("cuda: a page map asked of a cache the paged form does not read")
		}
		m := new(tensorMap)
		if err := encodePages(m, uint64(s.k), s.cfg.Pages*s.cfg.KVHeads, s.cfg.HeadDim); err != nil {
			return nil, err
		}
		s.kMap = m
	}
	return s.kMap, nil
}
