//go:build cuda

package cuda

import (
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// The packed form of stage 9 (fp8attn_stage9tv_d<pagedTilesHeadDim>,
// kernels/hopper/packed.cuh) runs a varlen batch at FP8E4M3 in one launch:
// the paged form's blocks (K and V read from the cache's pages in place,
// the queries encoded a scale a row by the consumers), each an item of one
// sequence's rows for one KV head, its query heads' rows packed
// query-major. A prompt chunk's rows fill blocks as the prefill kernel's
// do; a decode token's group of query heads fills rows of one block, which
// reads the sequence's pages once for the group. So a step of continuous
// batching, chunks beside decode tokens, is one grid with no split of the
// keys and no merge.

// packedLaunches counts the packed form's launches (tests: which path a
// call took).
var packedLaunches atomic.Int64

// packedTakes is whether the packed form runs p: a varlen FP8E4M3 call
// with host tables, outside a capture, on a cache of pagedTilesPage-token
// pages at pagedTilesHeadDim, without a softcap, where the Hopper module
// has the form and it is on (packedOn, or the cache's packed; not where
// the cache's groups).
func (s *pagedKV) packedTakes(p *backend.PagedProblem) bool {
	if s.groups || (!packedOn() && !s.packed) {
		return false
	}
	if p.QStarts == nil || p.Precision != backend.FP8E4M3 || p.Tables != nil || s.dev.capturing() != nil || p.Softcap != 0 ||
		p.D != pagedTilesHeadDim || s.cfg.PageSize != pagedTilesPage || s.dev.hopperErr != nil || s.dev.hopper == nil {
		return false
	}
	return s.dev.hopper[pagedTilesHeadDim].attnTensorsPacked != nil
}

// packedCall runs p (packedTakes said so) in one launch of the packed
// form: its tables, queries and items up in stageInputs' copies, its
// outputs poisoned where the cache poisons, a bad score factor flagged in
// the caller's out buffer (its Read names the sequence and head) or, for
// host slices, in a word read back here. The caller is inside do.
func (s *pagedKV) packedCall(p *backend.PagedProblem) error {
	k := s.dev.hopper[pagedTilesHeadDim]
	items := packedItems(p, k.cfg.BlockM, k.cfg.BlockN, packedOrder())
	if len(items) == 0 { // (Validate refuses a batch without queries: nothing to write)
		return nil
	}
	skip := make([]bool, p.B)
	for b := range skip {
		skip[b] = true
	}
	s.planSkipping(p, skip) // (s.params: the pools, the strides; no split-KV item)
	flat := unsafe.Slice((*int32)(unsafe.Pointer(&items[0])), 4*len(items))
	at, err := s.stageInputs(p, bytesOf(flat))
	if err != nil {
		return err
	}
	if err := s.poisonOutputs(p); err != nil {
		return err
	}
	kmap, err := s.pagesMap()
	if err != nil {
		return err
	}
	var flag uint64
	if p.QBuf != nil {
		bufs, err := ours(p.OutBuf)
		if err != nil {
			return err
		}
		if err := s.dev.flagFor(bufs[0]); err != nil {
			return err
		}
		flag = uint64(bufs[0].flag.p)
	} else {
		if flag, err = s.buf("packed flag", 4); err != nil {
			return err
		}
		if err := cu.MemsetD32Async(cu.DevicePtr(flag), 0, 1, s.dev.stream); err != nil {
			return err
		}
	}
	tl := s.packedParams(p, k.cfg, kmap, at, flag)
	if err := launchStruct(k.attnTensorsPacked, len(items), 1, 1, k.cfg.Threads, k.cfg.PagedSharedBytes(), s.dev.stream,
		unsafe.Pointer(tl)); err != nil {
		return err
	}
	packedLaunches.Add(1)
	if p.QBuf != nil {
		return nil
	}
	var bad [1]int32
	if err := s.downloadOutputs(p, []hostCopy{{dev: cu.DevicePtr(flag), host: bytesOf(bad[:])}}); err != nil {
		return err
	}
	return factorError(bad[0], p.Hq)
}

// packedParams is the packed form's parameter block for p: the packed
// tensors' strides ([1][Hq][T][D] in p.Layout, the LSE [Hq][T]), the
// cache's pages (kmap, the pools and their scales, the block table), the
// call's lengths, query starts and items (at, stageInputs' extra table),
// the score factor's check into flag.
func (s *pagedKV) packedParams(p *backend.PagedProblem, cfg tiles.HopperConfig, kmap *tensorMap, at, flag uint64) *tensorLaunch {
	pp := s.params
	t := p.Rows()
	_, hs, rs := p.Layout.Strides(p.Hq, t, p.D)
	lse := pp.LSE
	if p.LSE == nil && p.LSEBuf == nil {
		lse = 0
	}
	n, _ := longest(p)
	tl := new(tensorLaunch)
	tl.P.F = fusedQuantParams{P: params{
		Out: pp.Out, LSE: lse,
		QHeadStride: int64(hs), QRowStride: int64(rs), OHeadStride: int64(hs), ORowStride: int64(rs),
		B: int64(p.B), Hq: int64(p.Hq), Hkv: int64(p.Hkv), Sq: int64(t), Sk: int64(n), D: int64(p.D), Group: int64(p.Hq / p.Hkv),
		Mask: int64(p.Mask), Window: int64(p.SlidingWindow), Sinks: pp.Sinks, SeqK: pp.SeqLens,
	}, Bad: flag, Scale: float64(p.Scale), Limit: backend.MaxScoreFactor(p.D)}
	tp := &tl.P
	tp.K, tp.VPages, tp.KPageScale, tp.VPageScale, tp.BlockTable = *kmap, uint64(s.v), uint64(s.ks), uint64(s.vs), pp.BlockTable
	tp.PagesPerSeq, tp.PageKVHeads = int64(p.PagesPerSeq), int64(s.cfg.KVHeads)
	tp.QRows, tp.Items, tp.QStarts = pp.Q, at, pp.QStarts
	return tl
}
