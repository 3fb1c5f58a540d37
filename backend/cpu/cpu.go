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
	// calls holds finished calls for reuse with their scratch and FP8
	// decode buffers.
	calls freeList[call]
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
	scratch    freeList[scratch] // one per worker, reused
}

// Attention computes p.Out (and p.LSE).
func (b *Backend) Attention(p *backend.Problem) error {
	b.start.Do(b.startPool)
	c := b.calls.get()
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
	b.calls.put(c)
	return nil
}

// freeList keeps released objects for reuse. Unlike a sync.Pool it is not
// emptied by the garbage collector, so scratch and decode buffers survive
// between calls and a warm call allocates nothing.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
}

// get returns a released object, or a new zero one.
func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.items); n > 0 {
		x := f.items[n-1]
		f.items = f.items[:n-1]
		return x
	}
	return new(T)
}

// put releases x for reuse.
func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	f.items = append(f.items, x)
	f.mu.Unlock()
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
	sc := c.scratch.get()
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
	c.scratch.put(sc)
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

	m, l, acc := sc.m[:rowsN], sc.l[:rowsN], sc.acc[:rowsN*D]
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
		kb, vb := k[j0*D:j1*D], v[j0*D:j1*D]
		// Rows in pairs: scores and P·V share each key and value load.
		for r := 0; r < rowsN; r += 2 {
			n0 := min(j1, p.VisibleKeys(p.Mask, i0+r)) - j0
			n1 := 0
			if r+1 < rowsN {
				n1 = min(j1, p.VisibleKeys(p.Mask, i0+r+1)) - j0
			}
			if n1 <= 0 { // keys visible to row r only (or to no row)
				if n0 > 0 {
					c.update(sc, r, n0, q[r*D:(r+1)*D], nil, kb, vb, scoreScale)
				}
				continue
			}
			if n0 == n1 {
				c.update(sc, r, n0, q[r*D:(r+1)*D], q[(r+1)*D:(r+2)*D], kb, vb, scoreScale)
				continue
			}
			if n0 > 0 {
				c.update(sc, r, n0, q[r*D:(r+1)*D], nil, kb, vb, scoreScale)
			}
			c.update(sc, r+1, n1, q[(r+1)*D:(r+2)*D], nil, kb, vb, scoreScale)
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

// update runs one online-softmax step for row r (and row r+1 if q1 is not
// nil) over the first n keys of the block kb, vb.
func (c *call) update(sc *scratch, r, n int, q0, q1, kb, vb []float32, scale float32) {
	D, bk := c.p.D, c.bk
	s0 := sc.s[r*bk : r*bk+n]
	var s1 []float32
	if q1 != nil {
		s1 = sc.s[(r+1)*bk : (r+1)*bk+n]
	}
	scoresRows(s0, s1, q0, q1, kb, D, scale)
	acc0 := sc.acc[r*D : (r+1)*D]
	c.rescale(sc, r, s0, acc0)
	var acc1 []float32
	if q1 != nil {
		acc1 = sc.acc[(r+1)*D : (r+2)*D]
		c.rescale(sc, r+1, s1, acc1)
	}
	accumulate2(acc0, acc1, s0, s1, vb)
}

// rescale folds the scores s into row r's running max and sum: the old sum
// and output shrink by exp(m_old - m_new), and s becomes exp(s - m_new).
func (c *call) rescale(sc *scratch, r int, s, acc []float32) {
	mx := float32(math.Inf(-1))
	for _, x := range s {
		mx = max(mx, x) // propagates NaN
	}
	m, l := sc.m[r], sc.l[r]
	mNew := max(m, mx)
	if l != 0 || m != m {
		if alpha := exp32(m - mNew); alpha != 1 {
			l *= alpha
			for i := range acc {
				acc[i] *= alpha
			}
		}
	}
	sc.m[r], sc.l[r] = mNew, l+expSoftmax(s, mNew)
}

// Default is the registered instance.
var Default = New(0)

func init() { backend.Register(Default, 10) }

// String describes the backend for reports.
func (b *Backend) String() string { return fmt.Sprintf("cpu(workers=%d)", b.Workers()) }
