package sdpa

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/par"
)

// Options.OutlierChannels carries a head's largest channels of Q·Kᵀ in two
// E4M3 terms each, as LLM.int8() carries outlier features in 16 bits: the
// part of the error that E4M3's three-bit mantissa leaves in the channels
// that dominate the scores. In exact arithmetic nothing changes.
//
// For a channel c split at scales sq (Q's head) and sk (K's head), with
// hi(x, s) = E4M3(x/s)·s the value quantization would keep and
// lo(x, s) = x - hi(x, s) (exact in float32), the product
//
//	q·k = hi(q)·hi(k) + hi(q)·lo(k) + lo(q)·hi(k) + lo(q)·lo(k)
//
// is spread over channel c, which holds (hi(q), hi(k)), and three appended
// channels. Quantizing the widened rows with per-(batch, head) scales keeps
// hi exactly (it is a code times nearly the same scale) and quantizes the
// remainders, which are 16 times smaller, so the split channels lose about
// 2^-8 of their value where they lost 2^-4.

// outlierDim is the head dim the backend computes with n split channels on
// head dim d: d + 3n rounded up to a multiple of 16 (the granularity the
// SIMD and tensor-core kernels like), the extra channels zero.
func outlierDim(d, n int) int { return (d + 3*n + 15) &^ 15 }

// checkOutliers checks Options.OutlierChannels against the call's shapes.
func checkOutliers(n int, q, k *Tensor) error {
	switch {
	case n == 0:
		return nil
	case n < 0:
		return fmt.Errorf("%w: OutlierChannels is %d; it must not be negative", ErrInvalid, n)
	case n > q.D:
		return fmt.Errorf("%w: OutlierChannels is %d, more than the head dim %d", ErrInvalid, n, q.D)
	}
	dw := outlierDim(q.D, n)
	for _, t := range []*Tensor{q, k} {
		if _, ok := checked.Mul(t.B, t.H, t.S, dw); !ok {
			return fmt.Errorf("%w: OutlierChannels %d widens [%d][%d][%d][%d] to head dim %d, which overflows int", ErrInvalid, n, t.B, t.H, t.S, t.D, dw)
		}
	}
	return nil
}

// outlierBuffers is a call's scratch for the split: the widened Q, K, V
// and output, their headers, per-(batch, KV head) work arrays, and the job
// that shares the heads with par.Default's helpers.
type outlierBuffers struct {
	q, k, v, out     []float32
	qT, kT, vT, outT Tensor
	kmax, qmax       []uint32  // [B·Hkv][D]: |K| over the head, |Q| over its group, as bits
	chans            []int     // [B·Hkv][n]: the split channels
	qscale           []float32 // [B·Hq]
	job              outlierJob
}

// outlierJob widens one (batch, KV head) per item.
type outlierJob struct {
	b                   *outlierBuffers
	q, k, v, wq, wk, wv *Tensor
	n                   int
	next                atomic.Int64
}

func (j *outlierJob) Work(int) {
	for g := j.next.Add(1) - 1; g < int64(j.k.B*j.k.H); g = j.next.Add(1) - 1 {
		j.widenHead(int(g))
	}
}

// widen returns q, k and v widened by the split of n channels per
// (batch, KV head), and an output tensor of their head dim in out's layout
// whose first out.D channels are out's result (copy them with narrow).
func (b *outlierBuffers) widen(q, k, v, out *Tensor, n int) (wq, wk, wv, wout *Tensor) {
	dw := outlierDim(q.D, n)
	wide := func(buf *[]float32, hdr *Tensor, t *Tensor) *Tensor {
		*buf = freelist.Grow(*buf, t.B*t.H*t.S*dw)
		*hdr = Tensor{Data: *buf, B: t.B, H: t.H, S: t.S, D: dw, Layout: t.Layout}
		return hdr
	}
	wq, wk, wv, wout = wide(&b.q, &b.qT, q), wide(&b.k, &b.kT, k), wide(&b.v, &b.vT, v), wide(&b.out, &b.outT, out)
	heads := k.B * k.H
	b.kmax, b.qmax = freelist.Grow(b.kmax, heads*q.D), freelist.Grow(b.qmax, heads*q.D)
	b.chans = freelist.Grow(b.chans, heads*n)
	b.qscale = freelist.Grow(b.qscale, q.B*q.H)
	j := &b.job
	*j = outlierJob{b: b, q: q, k: k, v: v, wq: wq, wk: wk, wv: wv, n: n}
	helpers := 0
	if total := len(q.Data) + 2*len(k.Data); total >= parallelQuantizeMin {
		helpers = min(heads-1, total/parallelQuantizeMin-1)
	}
	par.Default.Run(helpers, j)
	j.q, j.k, j.v = nil, nil, nil // no reference to the caller's data in the pool
	return wq, wk, wv, wout
}

// widenHead widens KV head g (batch·Hkv + head) of K and V and its group's
// query heads.
func (j *outlierJob) widenHead(g int) {
	q, k, v, d, group := j.q, j.k, j.v, j.q.D, j.q.H/j.k.H
	bb, kvh := g/k.H, g%k.H
	kmax, qmax := j.b.kmax[g*d:(g+1)*d], j.b.qmax[g*d:(g+1)*d]
	clear(kmax)
	clear(qmax)
	for r := range k.S {
		channelAmax(kmax, k.row(bb, kvh, r))
	}
	kAmax := maxBits(kmax)
	finite := kAmax < infBits
	qscale := j.b.qscale[bb*q.H+kvh*group : bb*q.H+(kvh+1)*group]
	for h := range group {
		var amax uint32
		for i := range q.S {
			amax = max(amax, channelAmax(qmax, q.row(bb, kvh*group+h, i)))
		}
		finite = finite && amax < infBits
		qscale[h] = fp8.ScaleForAmax(math.Float32frombits(amax))
	}
	// A group with a NaN or an infinity is copied unsplit: what the split
	// would round is lost to the non-finite value anyway, and hi·lo
	// products of an infinity would make NaNs the plain call does not.
	chans := j.b.chans[g*j.n : g*j.n]
	if finite {
		chans = j.b.chans[g*j.n : (g+1)*j.n]
		largestProducts(chans, kmax, qmax)
	}
	ks := fp8.ScaleForAmax(math.Float32frombits(kAmax))
	for r := range k.S {
		splitRowFunc(j.wk.row(bb, kvh, r), k.row(bb, kvh, r), chans, ks, false)
		vr := j.wv.row(bb, kvh, r)
		copy(vr, v.row(bb, kvh, r))
		clear(vr[d:])
	}
	for h := range group {
		for i := range q.S {
			splitRowFunc(j.wq.row(bb, kvh*group+h, i), q.row(bb, kvh*group+h, i), chans, qscale[h], true)
		}
	}
}

// narrow copies the first out.D channels of every row of wide into out.
func narrow(out, wide *Tensor) {
	for bb := range out.B {
		for h := range out.H {
			for i := range out.S {
				copy(out.row(bb, h, i), wide.row(bb, h, i))
			}
		}
	}
}

// infBits is +Inf's bits: magnitudes' bits at or above it are not finite.
const infBits = 0x7f800000

// channelAmax raises m[c] to |row[c]|'s bits for every channel and returns
// the bits of the row's largest magnitude. The bits of magnitudes order as
// the magnitudes do, with NaN above +Inf: a NaN is never lost.
func channelAmax(m []uint32, row []float32) uint32 {
	var rmax uint32
	m = m[:len(row)]
	for c, x := range row {
		a := math.Float32bits(x) &^ (1 << 31)
		m[c] = max(m[c], a)
		rmax = max(rmax, a)
	}
	return rmax
}

func maxBits(m []uint32) uint32 {
	var r uint32
	for _, x := range m {
		r = max(r, x)
	}
	return r
}

// largestProducts fills chans with the channels of the len(chans) largest
// kmax[c]·qmax[c] (magnitudes' bits, all finite), largest first, the lower
// channel first among equals.
func largestProducts(chans []int, kmax, qmax []uint32) {
	taken := func(c int) bool {
		for _, t := range chans {
			if t == c {
				return true
			}
		}
		return false
	}
	for i := range chans {
		chans[i] = -1
	}
	for i := range chans {
		best, bestP := -1, float32(0)
		for c := range kmax {
			if taken(c) {
				continue
			}
			p := math.Float32frombits(kmax[c]) * math.Float32frombits(qmax[c])
			if best < 0 || p > bestP {
				best, bestP = c, p
			}
		}
		chans[i] = best
	}
}

// splitRowFunc is splitRow; the tests swap in broken variants.
var splitRowFunc = splitRow

// splitRow writes src widened into dst: src's channels, with each split
// channel c replaced by hi(src[c], scale) and its three appended channels
// (d+3i, d+3i+1, d+3i+2 for chans[i]) holding, for a query row,
// (hi, lo, lo) and for a key row (lo, hi, lo), so that the dot product of a
// widened query row and key row is that of the rows; the channels after
// them are zero.
func splitRow(dst, src []float32, chans []int, scale float32, query bool) {
	d := len(src)
	copy(dst, src)
	clear(dst[d:])
	for i, c := range chans {
		x := src[c]
		// The conversion rounds the product: without it the compiler
		// may fuse it into the subtraction below (arm64 does), and lo
		// would be taken from the unrounded product, so hi+lo != x.
		hi := float32(fp8.ToE4M3(x/scale, fp8.NoSat).Float32() * scale)
		lo := x - hi
		dst[c] = hi
		e := dst[d+3*i : d+3*i+3]
		if query {
			e[0], e[1], e[2] = hi, lo, lo
		} else {
			e[0], e[1], e[2] = lo, hi, lo
		}
	}
}
