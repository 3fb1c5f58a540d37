// Package cpu is the pure-Go attention backend: float32 tiled online softmax
// (the FlashAttention algorithm), parallel over (batch, head, query block) on
// a persistent pool of GOMAXPROCS workers, with scratch reused across calls so
// that a call allocates nothing.
//
// FP8E4M3 problems are computed as the GPU kernels compute them: E4M3 codes
// decoded through a table to their exact values, products accumulated in
// float32, the Q and K dequantization scales folded into the softmax scale and
// the V scale applied to the output.
//
// It registers itself as backend "cpu".
package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
)

// Tiles returns the query-block and key-block sizes for head dimension d:
// the S block (bq×bk) and a key and value block (bk×d each) stay in L1/L2.
func Tiles(d int) (bq, bk int) {
	if d > 128 {
		return 16, 32
	}
	return 16, 64
}

// Backend is the CPU backend. The zero value is not usable; use New.
type Backend struct {
	workers int
	start   sync.Once
	jobs    chan *call
	calls   sync.Pool // *call, reused
}

// New returns a CPU backend that runs on up to workers goroutines
// (workers <= 0: GOMAXPROCS at first use).
func New(workers int) *Backend {
	return &Backend{workers: workers}
}

// Name returns "cpu".
func (*Backend) Name() string { return "cpu" }

// Supports accepts every valid problem: any shape, head dimension, mask and
// precision.
func (*Backend) Supports(*backend.Problem) error { return nil }

// Workers returns the number of goroutines a call uses.
func (b *Backend) Workers() int {
	if b.workers > 0 {
		return b.workers
	}
	return runtime.GOMAXPROCS(0)
}

func (b *Backend) startPool() {
	b.jobs = make(chan *call)
	for i := 1; i < b.Workers(); i++ {
		go func() {
			for c := range b.jobs {
				c.work()
				c.done.Done()
			}
		}()
	}
}

// call is one Attention call's shared state; workers claim query blocks
// from next until none is left.
type call struct {
	p       *backend.Problem
	bq, bk  int
	qBlocks int // query blocks per head
	items   int
	next    atomic.Int64
	done    sync.WaitGroup
	// FP8: K and V decoded to their code values (unscaled), reused.
	kDec, vDec []float32
	scratch    sync.Pool // *scratch
}

// Attention computes p.Out (and p.LSE).
func (b *Backend) Attention(p *backend.Problem) error {
	b.start.Do(b.startPool)
	c, _ := b.calls.Get().(*call)
	if c == nil {
		c = &call{}
	}
	c.p = p
	c.bq, c.bk = Tiles(p.D)
	c.qBlocks = (p.Sq + c.bq - 1) / c.bq
	c.items = p.B * p.Hq * c.qBlocks
	c.next.Store(0)
	if p.Precision == backend.FP8E4M3 {
		c.kDec = grow(c.kDec, len(p.K8))
		c.vDec = grow(c.vDec, len(p.V8))
		fp8.DecodeE4M3(c.kDec, p.K8, 1)
		fp8.DecodeE4M3(c.vDec, p.V8, 1)
	}
	helpers := min(b.Workers(), c.items) - 1
	c.done.Add(helpers)
	for i := 0; i < helpers; i++ {
		b.jobs <- c
	}
	c.work()
	c.done.Wait()
	c.p = nil
	b.calls.Put(c)
	return nil
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// scratch is one worker's tile memory.
type scratch struct {
	q    []float32 // bq×D (FP8: decoded query rows)
	s    []float32 // bq×bk scores, then weights
	acc  []float32 // bq×D running output
	m, l []float32 // bq running max and sum
}

func (c *call) getScratch() *scratch {
	sc, _ := c.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	d := c.p.D
	sc.q = grow(sc.q, c.bq*d)
	sc.s = grow(sc.s, c.bq*c.bk)
	sc.acc = grow(sc.acc, c.bq*d)
	sc.m = grow(sc.m, c.bq)
	sc.l = grow(sc.l, c.bq)
	return sc
}

func (c *call) work() {
	sc := c.getScratch()
	for {
		it := int(c.next.Add(1)) - 1
		if it >= c.items {
			break
		}
		c.block(sc, it)
	}
	c.scratch.Put(sc)
}

// block computes query block it: head (b, h), rows [i0, i1).
func (c *call) block(sc *scratch, it int) {
	p := c.p
	D, bk := p.D, c.bk
	bh, qb := it/c.qBlocks, it%c.qBlocks
	b, h := bh/p.Hq, bh%p.Hq
	kvh := b*p.Hkv + h/p.Group()
	i0 := qb * c.bq
	i1 := min(i0+c.bq, p.Sq)
	rowsN := i1 - i0

	qOff := (bh*p.Sq + i0) * D
	kvOff := kvh * p.Sk * D
	var q, k, v []float32
	scoreScale, outScale := p.Scale, float32(1)
	if p.Precision == backend.FP8E4M3 {
		q = sc.q[:rowsN*D]
		fp8.DecodeE4M3(q, p.Q8[qOff:qOff+rowsN*D], 1)
		k, v = c.kDec[kvOff:kvOff+p.Sk*D], c.vDec[kvOff:kvOff+p.Sk*D]
		scoreScale *= p.QScale[bh] * p.KScale[kvh]
		outScale = p.VScale[kvh]
	} else {
		q = p.Q[qOff : qOff+rowsN*D]
		k, v = p.K[kvOff:kvOff+p.Sk*D], p.V[kvOff:kvOff+p.Sk*D]
	}

	m, l, acc, s := sc.m[:rowsN], sc.l[:rowsN], sc.acc[:rowsN*D], sc.s
	negInf := float32(math.Inf(-1))
	for r := range m {
		m[r], l[r] = negInf, 0
	}
	clear(acc)
	// Rows see keys [0, visible(i)); visible grows with i, so the last row
	// bounds the block's key range.
	nmax := p.VisibleKeys(p.Mask, i1-1)
	for j0 := 0; j0 < nmax; j0 += bk {
		j1 := min(j0+bk, nmax)
		for r := 0; r < rowsN; r++ {
			jend := min(j1, p.VisibleKeys(p.Mask, i0+r))
			if jend <= j0 {
				continue
			}
			n := jend - j0
			sr := s[r*bk : r*bk+n]
			qr := q[r*D : (r+1)*D]
			scores(sr, qr, k[j0*D:jend*D], D, scoreScale)
			mx := negInf
			for _, x := range sr {
				mx = max(mx, x) // propagates NaN
			}
			mNew := max(m[r], mx)
			ar := acc[r*D : (r+1)*D]
			if l[r] != 0 || m[r] != m[r] {
				if alpha := exp32(m[r] - mNew); alpha != 1 {
					l[r] *= alpha
					scaleVec(ar, alpha)
				}
			}
			m[r] = mNew
			var sum float32
			for j, x := range sr {
				e := exp32(x - mNew)
				sr[j] = e
				sum += e
			}
			l[r] += sum
			accumulate(ar, sr, v[j0*D:jend*D], D)
		}
	}
	out := p.Out[qOff : qOff+rowsN*D]
	for r := 0; r < rowsN; r++ {
		or, ar := out[r*D:(r+1)*D], acc[r*D:(r+1)*D]
		if p.VisibleKeys(p.Mask, i0+r) == 0 {
			clear(or)
			if p.LSE != nil {
				p.LSE[bh*p.Sq+i0+r] = negInf
			}
			continue
		}
		inv := outScale / l[r]
		for d := range or {
			or[d] = ar[d] * inv
		}
		if p.LSE != nil {
			p.LSE[bh*p.Sq+i0+r] = m[r] + float32(math.Log(float64(l[r])))
		}
	}
}

func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// scores sets s[j] = scale · (q · k[j*d:(j+1)*d]) for len(s) keys, four keys
// at a time so each q element loaded serves four independent sums.
func scores(s, q, k []float32, d int, scale float32) {
	n := len(s)
	j := 0
	for ; j+4 <= n; j += 4 {
		k0 := k[j*d : j*d+d]
		k1 := k[(j+1)*d : (j+1)*d+d]
		k2 := k[(j+2)*d : (j+2)*d+d]
		k3 := k[(j+3)*d : (j+3)*d+d]
		var a0, a1, a2, a3 float32
		for i, x := range q[:d] {
			a0 += x * k0[i]
			a1 += x * k1[i]
			a2 += x * k2[i]
			a3 += x * k3[i]
		}
		s[j], s[j+1], s[j+2], s[j+3] = a0*scale, a1*scale, a2*scale, a3*scale
	}
	for ; j < n; j++ {
		kj := k[j*d : j*d+d]
		var a0, a1 float32
		i := 0
		for ; i+2 <= d; i += 2 {
			a0 += q[i] * kj[i]
			a1 += q[i+1] * kj[i+1]
		}
		if i < d {
			a0 += q[i] * kj[i]
		}
		s[j] = (a0 + a1) * scale
	}
}

// accumulate adds Σ_j w[j]·v[j*d:(j+1)*d] to acc, four rows of v at a time.
func accumulate(acc, w, v []float32, d int) {
	n := len(w)
	acc = acc[:d]
	j := 0
	for ; j+4 <= n; j += 4 {
		w0, w1, w2, w3 := w[j], w[j+1], w[j+2], w[j+3]
		v0 := v[j*d : j*d+d]
		v1 := v[(j+1)*d : (j+1)*d+d]
		v2 := v[(j+2)*d : (j+2)*d+d]
		v3 := v[(j+3)*d : (j+3)*d+d]
		for i := range acc {
			acc[i] += w0*v0[i] + w1*v1[i] + w2*v2[i] + w3*v3[i]
		}
	}
	for ; j < n; j++ {
		wj, vj := w[j], v[j*d:j*d+d]
		for i := range acc {
			acc[i] += wj * vj[i]
		}
	}
}

func scaleVec(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// Default is the registered instance.
var Default = New(0)

func init() { backend.Register(Default, 10) }

// String describes the backend for reports.
func (b *Backend) String() string { return fmt.Sprintf("cpu(workers=%d)", b.Workers()) }
