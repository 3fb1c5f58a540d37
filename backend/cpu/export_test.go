package cpu

import (
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
