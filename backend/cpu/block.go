package cpu

import (
	"runtime"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// scratch is one worker's tile memory.
type scratch struct {
	q   []float32 // query rows, padded to a multiple of 4 (FP8: decoded)
	q16 []uint32  // q as bfloat16 pairs (call.pairs)
	k   []float32 // FP8: one key panel decoded, before transposing (paged: the panel)
	// codes: a strided layout's FP8 rows gathered before their decode
	// (gatherRows).
	codes []fp8.E4M3
	v     []float32 // paged: one panel of values, decoded
	s     []float32 // 4×panel scores, then weights
	t32   []float32 // a group's scores (softcapRow's exponentials)
	wide  []float32 // the block's rows' scores over all their keys (shortRows)
	// The AMX path's (amx.go): the block's query parts, 16 rows' scores
	// (then weights), their parts and P·V, and their rescale factors
	// (four past the rows: softmax4's scratch).
	qa, pa  []uint16
	s16, t  []float32
	alpha16 [amxRows + 4]float32
	group   amxGroup // amxGroups' argument (here, not on the heap)
	// amxBounds: amxGroup.bounds, 4 a key panel.
	amxBounds []rowBounds
	// amxAble: attendRows's groups the AMX path takes, a mask a panel.
	amxAble []uint64
	acc     []float32 // query rows × D running output
	m, l    []float32 // running max and sum per query row
	f       []float32 // per query row: the output's factor (attendRows)
	// rowLo, rowHi: per query row, the keys it sees (attendRows).
	rowLo, rowHi []int
	// alpha: the rescale factors of one group of four rows, padded to one
	// AVX2 vector (here, not on the stack: the kernels take its address
	// through a function value).
	alpha [8]float32
	// bounds: a group's rowBounds, stepBounds those of a run of groups
	// (here for the reason alpha is).
	bounds     rowBounds
	stepBounds []rowBounds
	// next is the block this worker takes after the one it runs, if it
	// knows (else -1), and end what the block's last key panel prefetches
	// (keyPanels.prefetch, blockEnd).
	next int
	end  ahead
}

func (c *call) getScratch() *scratch {
	sc := c.scratch.Get()
	d, rows := c.d, (c.bq+3)&^3
	sc.q = freelist.Grow(sc.q, rows*d)
	if c.pairs {
		sc.q16 = freelist.Grow(sc.q16, rows*d/2)
	}
	sc.k = freelist.Grow(sc.k, panel*d)
	if p := c.p; p != nil && p.Layout != backend.BHSD && p.Precision == backend.FP8E4M3 && !p.QuantizeOnRead {
		sc.codes = freelist.Grow(sc.codes, max(rows, panel)*d)
	}
	if c.pg != nil {
		sc.v = freelist.Grow(sc.v, panel*d)
	}
	sc.s = freelist.Grow(sc.s, 4*panel)
	sc.t32 = freelist.Grow(sc.t32, 4*panel)
	sc.acc = freelist.Grow(sc.acc, rows*d)
	if c.amxOn {
		sc.qa = freelist.Grow(sc.qa, 3*rows*d)
		sc.pa = freelist.Grow(sc.pa, 3*amxRows*panel)
		sc.s16 = freelist.Grow(sc.s16, amxRows*panel)
		sc.t = freelist.Grow(sc.t, amxRows*d)
		sc.amxBounds = freelist.Grow(sc.amxBounds, 4*c.panels)
	}
	sc.m = freelist.Grow(sc.m, rows)
	sc.l = freelist.Grow(sc.l, rows)
	sc.f = freelist.Grow(sc.f, rows)
	sc.rowLo = freelist.Grow(sc.rowLo, rows)
	sc.stepBounds = freelist.Grow(sc.stepBounds, rows/4)
	sc.rowHi = freelist.Grow(sc.rowHi, rows)
	return sc
}

// blockRange is one worker's contiguous range of query blocks, those of
// [front, back) not yet taken, packed in one word (front<<32 | back) and
// padded to a cache line of its own.
type blockRange struct {
	span atomic.Uint64
	_    [56]byte
}

// set makes the range [front, back).
func (r *blockRange) set(front, back int) {
	r.span.Store(uint64(front)<<32 | uint64(back))
}

// take takes the range's first block, or with last its last one, and
// returns it and the block the same end gives next, if any (else -1);
// it is -1 where none is left.
func (r *blockRange) take(last bool) (it, next int) {
	for {
		v := r.span.Load()
		front, back := int(v>>32), int(uint32(v))
		if front >= back {
			return -1, -1
		}
		it, next = front, front+1
		if last {
			it, next = back-1, back-2
			back--
		} else {
			front++
		}
		if r.span.CompareAndSwap(v, uint64(front)<<32|uint64(back)) {
			if front >= back {
				next = -1
			}
			return it, next
		}
	}
}

// Work is one worker's part of the call (par.Job): its own range of blocks
// first (worker w takes range w), from its front, then what is left of
// the others', from their backs: blocks of the heads their owners reach
// last, whose key panels the owners have not started to build (an owner
// descheduled while it builds a panel holds up every worker that needs
// it).
func (c *call) Work(w int) {
	sc := c.getScratch()
	own := w % len(c.ranges)
	for k := range c.ranges {
		r := &c.ranges[(own+k)%len(c.ranges)]
		for {
			it, next := r.take(k > 0)
			if it < 0 {
				break
			}
			sc.next = next
			c.block(sc, it)
		}
	}
	c.scratch.Put(sc)
}

// panelReady makes sure panel it is built: it builds it if no worker has
// started to, or else waits (a few microseconds at most) for the worker
// that has.
func (c *call) panelReady(sc *scratch, it int) {
	st := &c.panelState[it]
	if st.Load() == 2 {
		return
	}
	if st.CompareAndSwap(0, 1) {
		c.buildPanel(sc, it)
		st.Store(2)
		return
	}
	for i := 1; st.Load() != 2; i++ {
		if i%1024 == 0 {
			runtime.Gosched() // the builder may be waiting for a thread
		}
	}
}

// buildPanel transposes key block kb of KV head kvh (it = kvh*panels+kb)
// into its panel and, for FP8, decodes (or quantizes on read) the block's
// keys and values.
func (c *call) buildPanel(sc *scratch, it int) {
	p := c.p
	D := p.D
	kvh, kb := it/c.panels, it%c.panels
	j0 := kb * panel
	n := min(panel, p.Sk-j0)
	off := (kvh*p.Sk + j0) * D
	kt := c.kt[it*D*panel : (it+1)*D*panel]
	switch {
	case p.Layout != backend.BHSD:
		// Gather the panel's key and value rows (decoded for FP8) from
		// their strided places; V lands in vDec, [B][Hkv][Sk][D].
		k := sc.k[:n*D]
		b, h := kvh/p.Hkv, kvh%p.Hkv
		gatherRows(sc, k, p, inK, b, h, j0, p.Hkv, p.Sk, kvh)
		gatherRows(sc, c.vDec[off:off+n*D], p, inV, b, h, j0, p.Hkv, p.Sk, kvh)
		c.ks.transpose(kt, k, D, n)
	case p.Precision == backend.FP8E4M3:
		k := sc.k[:n*D]
		fp8Rows(k, p, inK, off, kvh, 1)
		fp8Rows(c.vDec[off:off+n*D], p, inV, off, kvh, 1)
		c.ks.transpose(kt, k, D, n)
	default:
		c.ks.transpose(kt, p.K[off:off+n*D], D, n)
	}
	if c.pairs {
		c.ks.pairs.panel(c.kt16[it*D/2*panel:(it+1)*D/2*panel], kt, D)
	}
	if len(c.vFinite) > 0 {
		c.vFinite[it] = c.ks.allFinite(c.values()[off : off+n*D])
	}
	if c.amxOn {
		c.amxOK[it] = false
		if n == panel {
			sz := amxPanelSize(D)
			c.amxOK[it] = c.ks.packAMXPanel(c.kAMX[it*sz:(it+1)*sz], c.vAMX[it*sz:(it+1)*sz], kt, c.values()[off:off+panel*D], D, c.amxExact)
		}
	}
}

// values returns the value rows the kernels read, [B][Hkv][Sk][D]: V as
// the problem holds it, or vDec where buildPanel decodes (FP8) or gathers
// (other layouts) it.
func (c *call) values() []float32 {
	if c.p.Precision == backend.FP8E4M3 || c.p.Layout != backend.BHSD {
		return c.vDec
	}
	return c.p.V
}

// block computes query block it: head (b, h), rows [i0, i1).
func (c *call) block(sc *scratch, it int) {
	if c.pg != nil {
		c.pagedBlock(sc, it)
		return
	}
	p := c.p
	if c.pack > 1 {
		c.packedBlock(sc, it)
		return
	}
	D := p.D
	bh, qb := c.blockOf(it)
	b, h := bh/p.Hq, bh%p.Hq
	kvh := b*p.Hkv + h/p.Group()
	i0 := qb * c.bq
	i1 := min(i0+c.bq, p.Sq)
	rowsN := i1 - i0
	rows := (rowsN + 3) &^ 3 // computed in groups of four

	qOff := (bh*p.Sq + i0) * D
	vOff := kvh * p.Sk * D
	var q []float32
	scoreScale, outScale := p.Scale, float32(1)
	if p.Precision == backend.FP8E4M3 {
		scoreScale = float32(p.ScoreFactor(bh))
		outScale = p.VScale[kvh]
	}
	switch {
	case p.Layout != backend.BHSD:
		// Gather the block's query rows (decoded for FP8); V was gathered
		// with the key panels.
		q = sc.q[:rows*D]
		gatherRows(sc, q[:rowsN*D], p, inQ, b, h, i0, p.Hq, p.Sq, bh)
		clear(q[rowsN*D:])
	case p.Precision == backend.FP8E4M3:
		q = sc.q[:rows*D]
		fp8Rows(q[:rowsN*D], p, inQ, qOff, bh, 1)
		clear(q[rowsN*D:])
	case rows == rowsN:
		q = p.Q[qOff : qOff+rowsN*D]
	default:
		q = sc.q[:rows*D]
		copy(q, p.Q[qOff:qOff+rowsN*D])
		clear(q[rowsN*D:])
	}
	v := c.values()[vOff : vOff+p.Sk*D]

	kp := c.densePanels(sc, kvh, v)
	kp.vFinite, kp.joined = c.finitePanels(kvh), true
	kp.prefetch, kp.kvh = p.Layout == backend.BHSD, kvh
	if c.pairs {
		c.ks.pairs.rows(sc.q16[:rows*D/2], q)
		kp.pairs = true
	}
	sc.end = ahead{}
	if kp.prefetch {
		sc.end = c.blockEnd(sc.next, qOff, rowsN*D)
	}
	_, _, rowStride := p.Layout.Strides(p.Hq, p.Sq, D)
	br := blockRows{
		lseBuf: p.LSE, outStride: rowStride, softcap: p.Softcap,
		visible: func(r int) int { return p.VisibleKeys(p.Mask, i0+r) },
		out: func(r int) int {
			if p.Layout != backend.BHSD {
				return p.Layout.Offset(b, h, i0+r, p.Hq, p.Sq, D)
			}
			return qOff + r*D
		},
		lse:     func(r int) int { return bh*p.Sq + i0 + r },
		steps01: true,
	}
	if p.SlidingWindow > 0 {
		br.lo = func(r int) int { lo, _ := p.KeyRange(i0 + r); return lo }
	}
	if p.Sinks != nil {
		br.sink = func(int) float32 { return p.Sinks[h] }
	}
	c.attendRows(sc, q, rowsN, scoreScale, outScale, p.Out, br, kp)
}

// blockOf returns the (batch·Hq + head) and query block of item it of an
// unpacked call. The items run head by head, the blocks of a head in
// order, or, for a masked problem, those that see the most keys first;
// but in a strided layout (BSHD) with several query heads a KV head, the
// group's heads take turns block by block: their query rows at the same
// positions lie side by side, so each block's gather finds the rows of
// the group's next head in the pages and cache lines its own brought in
// (the key panels are the group's in either order).
func (c *call) blockOf(it int) (bh, qb int) {
	p := c.p
	if g := p.Group(); g > 1 && p.Layout != backend.BHSD {
		per := c.qBlocks * g // items a KV head
		bk, r := it/per, it%per
		b, kh := bk/p.Hkv, bk%p.Hkv
		bh, qb = b*p.Hq+kh*g+r%g, r/g
	} else {
		bh, qb = it/c.qBlocks, it%c.qBlocks
	}
	if p.Mask != backend.NoMask {
		qb = c.qBlocks - 1 - qb // causal: the blocks that see the most keys first
	}
	return bh, qb
}

// densePanels is the key panels of KV head kvh of a dense problem, built
// on first use (panelReady), with its value rows v.
func (c *call) densePanels(sc *scratch, kvh int, v []float32) keyPanels {
	D := c.d
	kp := keyPanels{kb0: 0, kb1: c.panels, get: func(kb int) ([]float32, []float32) {
		pi := kvh*c.panels + kb
		c.panelReady(sc, pi)
		return c.kt[pi*D*panel : (pi+1)*D*panel], v[kb*panel*D:]
	}}
	if c.amxOn {
		sz := amxPanelSize(D)
		end := (kvh + 1) * c.panels * sz
		kp.amx = func(kb int) ([]uint16, []uint16, bool) {
			pi := kvh*c.panels + kb
			return c.kAMX[pi*sz : end], c.vAMX[pi*sz : end], c.amxOK[pi]
		}
	}
	return kp
}

// finitePanels is call.vFinite of KV head kvh's panels, or nil where the
// call does not fill it. (Not in densePanels, which must stay small
// enough to inline: its closures would move to the heap.)
func (c *call) finitePanels(kvh int) []bool {
	if len(c.vFinite) == 0 {
		return nil
	}
	return c.vFinite[kvh*c.panels : (kvh+1)*c.panels]
}

// panelInputs is what the first block to reach panel kb of KV head kvh
// reads and writes first (a problem in layout BHSD, dense): the panel's key
// and value rows as the problem holds them, the panel it transposes the
// keys into and, for FP8, the rows it decodes the values into; nothing
// where the panel is built or being built.
func (c *call) panelInputs(kvh, kb int) ahead {
	pi := kvh*c.panels + kb
	if c.panelState[pi].Load() != 0 {
		return ahead{}
	}
	p, D := c.p, c.d
	j0 := kb * panel
	off := (kvh*p.Sk + j0) * D
	end := off + min(panel, p.Sk-j0)*D
	var pf ahead
	pf.read[0], pf.read[1] = inputSpan(p, inK, off, end), inputSpan(p, inV, off, end)
	pf.write[0] = floatSpan(c.kt[pi*D*panel : (pi+1)*D*panel])
	if p.Precision == backend.FP8E4M3 {
		pf.write[1] = floatSpan(c.vDec[off:end])
	}
	return pf
}

// blockEnd is what to prefetch while the last key panel of a block runs
// (a problem in layout BHSD, dense): the query rows of block next, which
// the worker takes next, and, where the first panel that block reads (that
// of its first row's first key) is not built, its inputs (panelInputs);
// else the output rows [out, out+n) of the block, about to be written.
func (c *call) blockEnd(next, out, n int) ahead {
	p, D := c.p, c.d
	var pf ahead
	if next >= 0 {
		bh, qb := c.blockOf(next)
		i0 := qb * c.bq
		off := (bh*p.Sq + i0) * D
		end := off + (min(i0+c.bq, p.Sq)-i0)*D
		lo, _ := p.KeyRange(i0)
		pf = c.panelInputs(bh/p.Hq*p.Hkv+bh%p.Hq/p.Group(), min(lo, p.Sk-1)/panel)
		pf.read[2] = inputSpan(p, inQ, off, end)
	}
	if pf.write[0].bytes == 0 {
		pf.write[0] = floatSpan(p.Out[out : out+n])
	}
	return pf
}

// gatherRows writes into dst rows [i0, i0+len(dst)/D) of head (b, h) of
// input in of p (heads heads of seq rows, in p's strided layout): copied,
// or for FP8 what fp8Rows writes (scale index head, mul 1). An FP8 input's
// rows are gathered first (codes into sc.codes, float32 elements into dst)
// and converted in one call: one call a row costs each row the decode's
// setup, a few percent of the whole attention at D 128.
func gatherRows(sc *scratch, dst []float32, p *backend.Problem, in fp8Input, b, h, i0, heads, seq, head int) {
	D := p.D
	n := len(dst) / D
	codes, raw, scales := input(p, in)
	if p.Precision == backend.FP8E4M3 && !p.QuantizeOnRead {
		buf := sc.codes[:n*D]
		for r := range n {
			src := p.Layout.Offset(b, h, i0+r, heads, seq, D)
			copy(buf[r*D:(r+1)*D], codes[src:src+D])
		}
		fp8.DecodeE4M3(dst, buf, 1)
		return
	}
	for r := range n {
		src := p.Layout.Offset(b, h, i0+r, heads, seq, D)
		copy(dst[r*D:(r+1)*D], raw[src:src+D])
	}
	if p.Precision == backend.FP8E4M3 {
		fp8.RoundE4M3(dst, dst, scales[head], fp8.NoSat)
	}
}

// fp8Input names an input of an FP8E4M3 problem.
type fp8Input int

const (
	inQ fp8Input = iota
	inK
	inV
)

// input returns input in of p: its E4M3 codes, its float32 elements and its
// dequantization scales (those p holds).
func input(p *backend.Problem, in fp8Input) (codes []fp8.E4M3, raw, scales []float32) {
	switch in {
	case inK:
		return p.K8, p.K, p.KScale
	case inV:
		return p.V8, p.V, p.VScale
	}
	return p.Q8, p.Q, p.QScale
}

// inputSpan is elements [off, end) of input in of a dense problem as the
// kernels' inputs are read from it: the E4M3 codes of an FP8 problem given
// as codes, else the float32 elements.
func inputSpan(p *backend.Problem, in fp8Input, off, end int) span {
	codes, raw, _ := input(p, in)
	if p.Precision == backend.FP8E4M3 && !p.QuantizeOnRead {
		return codeSpan(codes[off:end])
	}
	return floatSpan(raw[off:end])
}

// fp8Rows writes into dst what the kernels compute on for elements [off,
// off+len(dst)) of input in of the FP8 problem p, head being the index of
// their dequantization scale (QScale for Q, KScale and VScale for K and
// V): the codes' values times mul. From codes that is a decode; for a
// problem quantized on read it is each element's code value at the scale
// (fp8.RoundE4M3, the arithmetic of fp8.QuantizeE4M3's encode), times mul
// where mul is not 1: the same bits either way.
func fp8Rows(dst []float32, p *backend.Problem, in fp8Input, off, head int, mul float32) {
	codes, raw, scales := input(p, in)
	n := len(dst)
	if !p.QuantizeOnRead {
		fp8.DecodeE4M3(dst, codes[off:off+n], mul)
		return
	}
	fp8.RoundE4M3(dst, raw[off:off+n], scales[head], fp8.NoSat)
	if mul != 1 {
		for i := range dst {
			dst[i] *= mul
		}
	}
}

// packBelow: the query heads of a KV head are packed into one block's rows
// (GQA packing) when Sq is below it, so that decode steps and short chunks
// read each key and value once per KV head and compute no padding rows.
const packBelow = 64

// packedBlock computes item it of a packed call: rows [i0, i1) of KV head
// (b, kvh), row r being query head kvh·pack + r%pack at position r/pack
// (positions never decrease along the rows, as the causal masks need). FP8
// query rows are decoded with their own head's scale, so that one score
// factor, scale·K descale, serves the whole block.
func (c *call) packedBlock(sc *scratch, it int) {
	p, g := c.p, c.pack
	D := p.D
	bk, qb := it/c.qBlocks, it%c.qBlocks
	if p.Mask != backend.NoMask {
		qb = c.qBlocks - 1 - qb
	}
	b, kh := bk/p.Hkv, bk%p.Hkv
	kvh := b*p.Hkv + kh
	i0 := qb * c.bq
	i1 := min(i0+c.bq, g*p.Sq)
	rowsN := i1 - i0
	rows := (rowsN + 3) &^ 3
	head := func(r int) (h, i int) { return kh*g + (i0+r)%g, (i0 + r) / g }
	q := sc.q[:rows*D]
	for r := 0; r < rowsN; r++ {
		h, i := head(r)
		src := p.Layout.Offset(b, h, i, p.Hq, p.Sq, D)
		if p.Precision == backend.FP8E4M3 {
			fp8Rows(q[r*D:(r+1)*D], p, inQ, src, b*p.Hq+h, p.QScale[b*p.Hq+h])
		} else {
			copy(q[r*D:(r+1)*D], p.Q[src:src+D])
		}
	}
	clear(q[rowsN*D:])
	scoreScale, outScale := p.Scale, float32(1)
	v := c.values()[kvh*p.Sk*D : (kvh+1)*p.Sk*D]
	if p.Precision == backend.FP8E4M3 {
		scoreScale = float32(float64(p.Scale) * float64(p.KScale[kvh]))
		outScale = p.VScale[kvh]
	}
	kp := c.densePanels(sc, kvh, v)
	kp.vFinite, kp.joined = c.finitePanels(kvh), true
	kp.prefetch, kp.kvh = p.Layout == backend.BHSD, kvh
	sc.end = ahead{}
	br := blockRows{
		lseBuf: p.LSE, softcap: p.Softcap,
		visible: func(r int) int { _, i := head(r); return p.VisibleKeys(p.Mask, i) },
		out: func(r int) int {
			h, i := head(r)
			return p.Layout.Offset(b, h, i, p.Hq, p.Sq, D)
		},
		lse: func(r int) int { h, i := head(r); return (b*p.Hq+h)*p.Sq + i },
	}
	if p.SlidingWindow > 0 {
		br.lo = func(r int) int { _, i := head(r); lo, _ := p.KeyRange(i); return lo }
	}
	if p.Sinks != nil {
		br.sink = func(r int) float32 { h, _ := head(r); return p.Sinks[h] }
	}
	c.attendRows(sc, q, rowsN, scoreScale, outScale, p.Out, br, kp)
}
