package cpu

import (
	"sync"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
)

// PagedRows returns the keys and values page pg holds for KV head h,
// decoded exactly (code × the page's scale), as [PageSize][D] rows each,
// and the two scales.
func PagedRows(kv backend.PagedKV, pg, h int) (k, v []float32, kScale, vScale float32) {
	s := kv.(*pagedKV)
	D, P := s.cfg.HeadDim, s.cfg.PageSize
	blk, sc := s.block(pg, h), pg*s.cfg.KVHeads+h
	k, v = make([]float32, P*D), make([]float32, P*D)
	for j := range P {
		for i := range D {
			k[j*D+i] = s.k[blk+i*P+j].Float32() * s.kScale[sc]
		}
	}
	fp8.DecodeE4M3(v, s.v[blk:blk+P*D], s.vScale[sc])
	return k, v, s.kScale[sc], s.vScale[sc]
}

// FMAPeak is fmaPeak.
var FMAPeak = fmaPeak

// TakeAll takes the blocks of a range [front, back) on takers goroutines
// at once, half of them from its front and half from its back, and
// returns how many times each block was taken and whether a next block
// given by take was ever outside the range or already taken.
func TakeAll(front, back, takers int) (counts []int32, badNext bool) {
	var r blockRange
	r.set(front, back)
	cs := make([]atomic.Int32, back)
	var bad atomic.Bool
	var wg sync.WaitGroup
	for t := range takers {
		wg.Go(func() {
			for {
				it, next := r.take(t%2 == 1)
				if it < 0 {
					return
				}
				cs[it].Add(1)
				if next >= 0 && (next < front || next >= back) {
					bad.Store(true)
				}
			}
		})
	}
	wg.Wait()
	counts = make([]int32, back)
	for i := range cs {
		counts[i] = cs[i].Load()
	}
	return counts, bad.Load()
}
