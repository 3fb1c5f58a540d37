package cpu

import (
	"fmt"
	"math"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// The CPU's paged FP8 cache. Each (page, KV head) holds its keys transposed,
// [D][PageSize] codes, so that a 64-key slice of a page decodes straight into
// the transposed key panel the assembly kernels take, and its values as rows,
// [PageSize][D]. Attention decodes each panel it needs into a worker's
// scratch (a few tens of kilobytes that stay in cache), with the page's
// scales applied, and runs the float32 micro-kernels on it: the cache is read
// as one byte per element, and nothing proportional to the cache length is
// written.

// NewPagedKV allocates a paged cache. The page size must be a multiple of
// 64 (the kernels' key panel); others get ErrUnsupported.
func (b *Backend) NewPagedKV(c backend.PagedConfig) (backend.PagedKV, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: a nil cpu backend", backend.ErrInvalid)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.PageSize%panel != 0 {
		return nil, fmt.Errorf("%w: the cpu backend's pages hold a multiple of %d tokens, not %d", backend.ErrUnsupported, panel, c.PageSize)
	}
	n := c.Pages * c.PageSize * c.KVHeads * c.HeadDim
	return &pagedKV{
		b:      b,
		cfg:    c,
		k:      make([]fp8.E4M3, n),
		v:      make([]fp8.E4M3, n),
		kScale: make([]float32, c.Pages*c.KVHeads),
		vScale: make([]float32, c.Pages*c.KVHeads),
	}, nil
}

// pagedKV is the storage of one cache. kScale and vScale hold each (page,
// head)'s dequantization scale, a power of two, or 0 while the page has
// held only zeros.
type pagedKV struct {
	b              *Backend
	cfg            backend.PagedConfig
	k, v           []fp8.E4M3
	kScale, vScale []float32
	codes          []fp8.E4M3 // Append's scratch: one row
	requant        []float32  // Append's scratch: one page and head
	closed         bool
}

func (s *pagedKV) Config() backend.PagedConfig { return s.cfg }

func (s *pagedKV) Bytes() int64 {
	return int64(len(s.k)+len(s.v)) + 4*int64(len(s.kScale)+len(s.vScale))
}

func (s *pagedKV) Close() error {
	s.k, s.v, s.kScale, s.vScale, s.closed = nil, nil, nil, nil, true
	return nil
}

func (s *pagedKV) errClosed() error {
	if s.closed {
		return fmt.Errorf("%w: the paged cache is closed", backend.ErrInvalid)
	}
	return nil
}

// block returns the offset of (page, head)'s codes in k and v.
func (s *pagedKV) block(pg, h int) int {
	return (pg*s.cfg.KVHeads + h) * s.cfg.HeadDim * s.cfg.PageSize
}

// ReadPage implements backend.PagedReader.
func (s *pagedKV) ReadPage(page, head int, k, v []fp8.E4M3) (kScale, vScale float32, err error) {
	if err := s.errClosed(); err != nil {
		return 0, 0, err
	}
	c := s.cfg
	if page < 0 || page >= c.Pages || head < 0 || head >= c.KVHeads || len(k) != c.PageSize*c.HeadDim || len(v) != len(k) {
		return 0, 0, fmt.Errorf("%w: ReadPage(%d, %d) into %d and %d codes (pool of %d pages, %d heads, %d×%d a block)",
			backend.ErrInvalid, page, head, len(k), len(v), c.Pages, c.KVHeads, c.PageSize, c.HeadDim)
	}
	blk, D, P := s.block(page, head), c.HeadDim, c.PageSize
	for i := range D { // keys are stored [D][P]
		for j := range P {
			k[j*D+i] = s.k[blk+i*P+j]
		}
	}
	copy(v, s.v[blk:blk+D*P])
	return s.kScale[page*c.KVHeads+head], s.vScale[page*c.KVHeads+head], nil
}

// CopyPage implements backend.PagedKV.
func (s *pagedKV) CopyPage(dst, src int) error {
	if err := s.errClosed(); err != nil {
		return err
	}
	if err := s.cfg.CheckCopyPage(dst, src); err != nil {
		return err
	}
	H := s.cfg.KVHeads
	n := H * s.cfg.HeadDim * s.cfg.PageSize // a page's blocks are contiguous
	copy(s.k[dst*n:(dst+1)*n], s.k[src*n:(src+1)*n])
	copy(s.v[dst*n:(dst+1)*n], s.v[src*n:(src+1)*n])
	copy(s.kScale[dst*H:(dst+1)*H], s.kScale[src*H:(src+1)*H])
	copy(s.vScale[dst*H:(dst+1)*H], s.vScale[src*H:(src+1)*H])
	return nil
}

// Append quantizes the new tokens into their slots, token after token (a
// page's scale may grow on any token; see the scale policy in package
// backend).
func (s *pagedKV) Append(a *backend.PagedAppend) error {
	if err := s.errClosed(); err != nil {
		return err
	}
	if err := a.Validate(s.cfg); err != nil {
		return err
	}
	if a.KBuf != nil {
		return fmt.Errorf("%w: the cpu cache takes keys and values in host memory", backend.ErrUnsupported)
	}
	H, D, P := s.cfg.KVHeads, s.cfg.HeadDim, s.cfg.PageSize
	s.codes = freelist.Grow(s.codes, D)
	for b := range a.B {
		for t := range a.N {
			pg, slot := int(a.Page[b*a.N+t]), int(a.Slot[b*a.N+t])
			for h := range H {
				blk := s.block(pg, h)
				sc := pg*H + h
				if slot == 0 { // a new page: forget its previous owner
					clear(s.k[blk : blk+D*P])
					clear(s.v[blk : blk+D*P])
					s.kScale[sc], s.vScale[sc] = 0, 0
				}
				src := a.Layout.Offset(b, h, t, H, a.N, D)
				s.put(s.k[blk:blk+D*P], &s.kScale[sc], a.K[src:src+D], slot, true)
				s.put(s.v[blk:blk+D*P], &s.vScale[sc], a.V[src:src+D], slot, false)
			}
		}
	}
	return nil
}

// put encodes row into slot of one (page, head) block with the block's
// scale, first growing the scale (and re-encoding the block) if the row
// would not fit. transposed: the block is [D][P], else [P][D].
func (s *pagedKV) put(blk []fp8.E4M3, scale *float32, row []float32, slot int, transposed bool) {
	D, P := s.cfg.HeadDim, s.cfg.PageSize
	amax := fp8.Amax(row)
	if amax > 0 {
		switch old := *scale; {
		case old == 0: // the block holds zeros only: any scale keeps them
			*scale = backend.PageScale(amax)
		case amax > fp8.MaxE4M3*old:
			nw := backend.PageScale(amax)
			// old/nw is a power of two: the decode is exact, and so is the
			// encode of every value that stays in E4M3's normal range.
			s.requant = freelist.Grow(s.requant, D*P)
			fp8.DecodeE4M3(s.requant, blk, old/nw)
			fp8.EncodeE4M3(blk, s.requant, 1, fp8.SatFinite)
			*scale = nw
		}
	}
	codes := s.codes[:D]
	if *scale == 0 {
		clear(codes) // an all-zero row into an all-zero block
	} else {
		fp8.EncodeE4M3(codes, row, *scale, fp8.SatFinite) // |row| <= 448·scale: nothing saturates
	}
	if transposed {
		for i, c := range codes {
			blk[i*P+slot] = c
		}
	} else {
		copy(blk[slot*D:(slot+1)*D], codes)
	}
}

// pagedCall is the part of a call that is a paged problem. Its items are
// (sequence, KV head, query block, key split) in that order; the query
// heads of a KV head are packed as its blocks' rows (row r: head kh·g + r%g
// at position r/g). With more than one split, each item writes its rows'
// partial output and log-sum-exp to part, and merge combines them.
type pagedCall struct {
	p                *backend.PagedProblem
	kv               *pagedKV
	g                int
	splits, perSplit int // key splits per block, panels per split
	partOut, partLSE []float32
}

// minSplitPanels is the fewest key panels a split gets: below it the merge
// and the per-split bookkeeping cost more than the parallelism returns.
const minSplitPanels = 4

// Attention computes p.Out (and p.LSE) from the cache.
func (s *pagedKV) Attention(p *backend.PagedProblem) error {
	if err := s.errClosed(); err != nil {
		return err
	}
	if err := p.Validate(s.cfg); err != nil {
		return err
	}
	if p.QBuf != nil {
		return fmt.Errorf("%w: the cpu cache takes host slices, not device buffers", backend.ErrUnsupported)
	}
	b := s.b
	workers := b.Workers()
	c := b.calls.Get()
	c.p, c.pg, c.ks, c.d = nil, &c.paged, b.ks, p.D
	pc := c.pg
	pc.p, pc.kv, pc.g = p, s, p.Hq/p.Hkv
	rows := backend.Shape{B: p.B, Hq: p.Hkv, Sq: pc.g * p.Sq}
	c.bq = QueryBlock(rows, workers)
	c.qBlocks = (rows.Sq + c.bq - 1) / c.bq
	blocks := p.B * p.Hkv * c.qBlocks
	// The panels a block runs over start at its first row's window (the
	// whole sequence without one): a windowed decode reads the pages
	// inside its window only, and splits those.
	maxPanels := 1
	for b, n := range p.SeqLens {
		lo, _ := p.KeyRange(b, 0)
		maxPanels = max(maxPanels, (int(n)+panel-1)/panel-lo/panel)
	}
	pc.splits = 1
	if blocks < 2*workers {
		pc.splits = max(1, min((2*workers+blocks-1)/blocks, maxPanels/minSplitPanels))
	}
	pc.perSplit = (maxPanels + pc.splits - 1) / pc.splits
	c.items = blocks * pc.splits
	if pc.splits > 1 {
		pc.partOut = freelist.Grow(pc.partOut, c.items*c.bq*p.D)
		pc.partLSE = freelist.Grow(pc.partLSE, c.items*c.bq)
	}
	b.run(c, workers)
	if pc.splits > 1 {
		c.merge()
	}
	pc.p, pc.kv, c.pg = nil, nil, nil
	b.calls.Put(c)
	return nil
}

// pagedBlock computes item it of a paged call.
func (c *call) pagedBlock(sc *scratch, it int) {
	pc := c.pg
	p, kv, g := pc.p, pc.kv, pc.g
	D, P := p.D, kv.cfg.PageSize
	sp, rest := it%pc.splits, it/pc.splits
	bk, qb := rest/c.qBlocks, rest%c.qBlocks
	b, kh := bk/p.Hkv, bk%p.Hkv
	i0 := qb * c.bq
	rowsN := min(i0+c.bq, g*p.Queries(b)) - i0
	if rowsN <= 0 { // past a varlen sequence's rows
		return
	}
	rows := (rowsN + 3) &^ 3
	head := func(r int) (h, i int) { return kh*g + (i0+r)%g, (i0 + r) / g }
	q := sc.q[:rows*D]
	for r := range rowsN {
		h, i := head(r)
		src := p.QOffset(b, h, i)
		copy(q[r*D:(r+1)*D], p.Q[src:src+D])
	}
	clear(q[rowsN*D:])
	table := p.BlockTable[b*p.PagesPerSeq : (b+1)*p.PagesPerSeq]
	base := 0 // the block's first panel: its first row's window's
	if p.SlidingWindow > 0 {
		_, i := head(0)
		lo, _ := p.KeyRange(b, i)
		base = lo / panel
	}
	kp := keyPanels{kb0: base + sp*pc.perSplit, kb1: base + (sp+1)*pc.perSplit, get: func(kb int) ([]float32, []float32) {
		j0 := kb * panel
		pg, col := int(table[j0/P]), j0%P
		blk, sIdx := kv.block(pg, kh), pg*p.Hkv+kh
		kt, vr := sc.k[:D*panel], sc.v[:panel*D]
		kBlk := kv.k[blk : blk+D*P]
		switch ks := kv.kScale[sIdx]; {
		case c.ks.rowPanels: // the Go kernels take keys as rows
			for i := range D {
				for j, code := range kBlk[i*P+col : i*P+col+panel] {
					kt[j*D+i] = code.Float32() * ks
				}
			}
		case P == panel:
			fp8.DecodeE4M3(kt, kBlk, ks)
		default:
			for i := range D {
				fp8.DecodeE4M3(kt[i*panel:(i+1)*panel], kBlk[i*P+col:], ks)
			}
		}
		fp8.DecodeE4M3(vr, kv.v[blk+col*D:blk+(col+panel)*D], kv.vScale[sIdx])
		return kt, vr
	}}
	outBuf := p.Out
	br := blockRows{
		lseBuf: p.LSE, softcap: p.Softcap,
		visible: func(r int) int { _, i := head(r); return p.VisibleKeys(b, i) },
		out: func(r int) int {
			h, i := head(r)
			return p.QOffset(b, h, i)
		},
		lse: func(r int) int { h, i := head(r); return p.LSEIndex(b, h, i) },
	}
	if p.SlidingWindow > 0 {
		br.lo = func(r int) int { _, i := head(r); lo, _ := p.KeyRange(b, i); return lo }
	}
	if pc.splits > 1 { // partial rows: merge adds the sinks
		outBuf, br.lseBuf, br.outStride = pc.partOut, pc.partLSE, D
		br.out = func(r int) int { return (it*c.bq + r) * D }
		br.lse = func(r int) int { return it*c.bq + r }
	} else if p.Sinks != nil {
		br.sink = func(r int) float32 { h, _ := head(r); return p.Sinks[h] }
	}
	c.attendRows(sc, q, rowsN, p.Scale, 1, outBuf, br, kp)
}

// merge combines the splits' partial rows: with weights w_s = e^(lse_s -
// max lse), out = Σ w_s·out_s / (Σ w_s + e^(sink - max lse)) (no sink: 0)
// and lse = max lse + ln Σ w_s, the sink joining the denominator once and
// the LSE not at all. A row no split saw a key for gets zeros and -Inf; a
// NaN in any split stays NaN.
func (c *call) merge() {
	pc := c.pg
	p, g := pc.p, pc.g
	D := p.D
	negInf := float32(math.Inf(-1))
	for rest := 0; rest < c.items/pc.splits; rest++ {
		bk, qb := rest/c.qBlocks, rest%c.qBlocks
		b, kh := bk/p.Hkv, bk%p.Hkv
		i0 := qb * c.bq
		rowsN := min(i0+c.bq, g*p.Queries(b)) - i0 // (none past a varlen sequence's rows)
		for r := range rowsN {
			h, i := kh*g+(i0+r)%g, (i0+r)/g
			o := p.QOffset(b, h, i)
			out := p.Out[o : o+D]
			mx := negInf
			for sp := range pc.splits {
				mx = max(mx, pc.partLSE[(rest*pc.splits+sp)*c.bq+r])
			}
			var lse float32
			if mx == negInf {
				clear(out)
				lse = negInf
			} else {
				var sum float64
				clear(out)
				for sp := range pc.splits {
					part := (rest*pc.splits+sp)*c.bq + r
					w := float32(math.Exp(float64(pc.partLSE[part] - mx)))
					sum += float64(w)
					for d, x := range pc.partOut[part*D : (part+1)*D] {
						out[d] += w * x
					}
				}
				den := sum
				if p.Sinks != nil {
					den += math.Exp(float64(p.Sinks[h]) - float64(mx))
				}
				inv := float32(1 / den)
				for d := range out {
					out[d] *= inv
				}
				lse = mx + float32(math.Log(sum))
			}
			if p.LSE != nil {
				p.LSE[p.LSEIndex(b, h, i)] = lse
			}
		}
	}
}
