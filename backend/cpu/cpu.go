// Package cpu is the CPU attention backend: float32 tiled online softmax
// (the FlashAttention algorithm), parallel over (batch, head, query block) on
// a persistent pool of GOMAXPROCS workers, with scratch reused across calls so
// that a call allocates nothing.
//
// The work is done by micro-kernels (kernels.go): four query rows against a
// panel of 64 keys (transposed for the assembly sets, kept as rows for the
// Go set), the softmax step on each score row, and four rows of P·V. They come in sets: portable Go, and on amd64 AVX2+FMA and
// AVX-512 assembly picked by CPU features (ISAs); the purego build tag
// leaves only the Go set.
//
// FP8E4M3 problems are computed as the GPU kernels compute them: E4M3 codes
// decoded to their exact values, products accumulated in
// float32, the Q and K dequantization scales folded into the softmax scale and
// the V scale applied to the output. Given float32 inputs to quantize on read
// (backend.Problem.QuantizeOnRead, how sdpa's FP8 call hands them over), it
// rounds each element to its code's value where it would decode the code
// (fp8.RoundE4M3), so no codes are written or read and the result is the
// same bit for bit.
//
// It registers itself as backend "cpu", and each kernel set as "cpu/ISA".
package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/par"
)

// Backend is the CPU backend. The zero value is not usable; use New.
type Backend struct {
	name    string
	ks      *kernelSet
	workers int
	// pool runs a call's workers: par.Default for a backend with the
	// default workers and spin (so that it shares its polling helpers with
	// sdpa's quantization), a pool of its own for a configured one.
	pool *par.Pool
	// calls holds finished calls for reuse with their scratch, key panels
	// and FP8 decode buffers.
	calls freelist.List[call]
}

// New returns a CPU backend with the fastest kernels this CPU runs (ISAs()[0])
// on up to workers goroutines (workers <= 0: GOMAXPROCS at first use).
func New(workers int) *Backend {
	return &Backend{name: "cpu", ks: kernelSets[0], workers: workers, pool: poolFor(workers, DefaultSpin)}
}

// poolFor returns the helpers of a backend with workers workers polling for
// spin: the process's pool for the defaults, else a pool of workers-1.
func poolFor(workers int, spin time.Duration) *par.Pool {
	if workers <= 0 && spin == DefaultSpin {
		return par.Default
	}
	return par.NewPool(workers-1, spin)
}

// NewISA returns a CPU backend that uses the kernels for isa, one of ISAs().
func NewISA(workers int, isa string) (*Backend, error) {
	return NewConfig("cpu/"+isa, Config{Workers: workers, ISA: isa})
}

// Config sets up a CPU backend for serving.
type Config struct {
	// Workers bounds the goroutines one call uses, the caller's included;
	// <= 0 means GOMAXPROCS when the backend first runs.
	Workers int
	// Spin is how long an idle helper goroutine keeps polling for the next
	// call before it parks: 0 means DefaultSpin; a negative value parks at
	// once, which burns no CPU between calls but starts back-to-back calls
	// on one goroutine while the helpers wake up.
	Spin time.Duration
	// ISA selects a kernel set, one of ISAs(); "" means the fastest.
	ISA string
}

// DefaultSpin is the helpers' polling time when Config.Spin is 0.
const DefaultSpin = par.DefaultSpin

// NewConfig returns a CPU backend named name with the given configuration.
// Register it (backend.Register) to select it by name from package sdpa.
// Concurrent calls on one backend share its helpers and are safe.
func NewConfig(name string, c Config) (*Backend, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: cpu backend needs a name", backend.ErrInvalid)
	}
	ks := kernelSets[0]
	if c.ISA != "" {
		ks = nil
		for _, k := range kernelSets {
			if k.name == c.ISA {
				ks = k
			}
		}
		if ks == nil {
			return nil, fmt.Errorf("%w: cpu kernels %q (this CPU runs %v)", backend.ErrUnsupported, c.ISA, ISAs())
		}
	}
	spin := c.Spin
	if spin == 0 {
		spin = DefaultSpin
	}
	return &Backend{name: name, ks: ks, workers: c.Workers, pool: poolFor(c.Workers, spin)}, nil
}

// ISAs lists the kernel sets this build runs on this CPU, the default
// first: "amxfp8" (FP8 problems on AMX tiles, the others on avx512) on
// Linux with AMX-BF16; "avx512" and "avx2" on amd64 CPUs that have them
// (not with the purego build tag); "avx512bf16" (FP8 scores on bfloat16
// pairs) where the CPU has AVX512_BF16, the default on AMD and after
// "avx512" elsewhere, where it measured slower (docs/PERF.md); "amx" (every
// problem on AMX tiles, selectable, never the default) with AMX-BF16; and
// always "go", the portable kernels.
func ISAs() []string {
	names := make([]string, len(kernelSets))
	for i, ks := range kernelSets {
		names[i] = ks.name
	}
	return names
}

// Name returns "cpu", or "cpu/ISA" for a backend made by NewISA.
func (b *Backend) Name() string { return b.name }

// ISA returns the name of the kernel set b uses.
func (b *Backend) ISA() string { return b.ks.name }

// QuantizesOnRead reports that the backend takes FP8E4M3 problems in float32
// to quantize as it reads them (backend.Problem.QuantizeOnRead): it computes
// on the codes' values in any case, so it rounds each element to its code's
// value where it would have decoded the code, and no codes are written or
// read.
func (*Backend) QuantizesOnRead(*backend.Problem) bool { return true }

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

// Idle helpers keep polling for the next call for the backend's spin time
// before they park (package par). Back-to-back calls then start on every
// worker at once, as OpenMP runtimes do with their block time; waking parked
// goroutines instead brings the workers up one after another, which at 16
// workers costs about as much as a mission-shape call.

// QueryBlock returns the number of query rows one work item computes: 64,
// halved down to 16 while that leaves fewer than eight items per worker (so
// that a worker that starts late or runs slow leaves little tail; the key
// panels are built once per call, so smaller blocks cost only their own
// bookkeeping).
func QueryBlock(s backend.Shape, workers int) int {
	bq := 64
	for bq > 16 && s.B*s.Hq*((s.Sq+bq-1)/bq) < 8*workers {
		bq /= 2
	}
	return bq
}

// call is one Attention call's shared state. The query blocks, in head-major
// order, are split into one contiguous range per worker; each worker works
// through its own range and then takes blocks from the others' (so a worker
// that starts late or runs slow delays no one). Contiguous blocks share a
// head, so a worker mostly reads key panels it built itself: the key panels
// a block needs (K transposed, and for FP8 K and V decoded) are built by the
// first worker that needs each one, while any other worker that needs it
// meanwhile waits for it. Causal heads run their longest blocks first.
type call struct {
	p       *backend.Problem
	pg      *pagedCall // a paged call, instead of p: &paged
	paged   pagedCall
	ks      *kernelSet
	d       int // head dimension
	bq      int
	qBlocks int // query blocks per head (per KV head when packed)
	items   int
	// pack is the GQA group size when the query heads of each KV head are
	// packed as the rows of its blocks (packed row r is query head
	// kvh·pack + r%pack at position r/pack), else 1.
	pack   int
	panels int // key panels per KV head
	// ranges are the workers' blocks; panelState[i] is 0 (not built), 1
	// (being built) or 2 (ready).
	ranges     []blockRange
	panelState []atomic.Int32
	// kt holds every key panel, transposed: panel (kvh, kb) at
	// (kvh*panels+kb)*D*panel. vDec holds V decoded (FP8 only).
	kt, vDec []float32
	// pairs says the FP8 blocks' dot products run on bfloat16 pairs
	// (pairKernels): kt16 then holds every key panel as pairs, panel
	// (kvh, kb) at (kvh*panels+kb)*D/2*panel, and each block its query
	// rows as pairs (scratch.q16).
	pairs bool
	kt16  []uint32
	// amxOn says the AMX path runs (kernelSet.amxUsable): kAMX and vAMX
	// then hold each full panel's B operands (amx.go) and amxOK whether
	// AMX keeps all of the panel's elements. amxExact says that its
	// operands are exact in bfloat16 and the fused form runs them
	// (amxGroup.exact): their splits write the h parts alone.
	amxOn, amxExact bool
	kAMX, vAMX      []uint16
	amxOK           []bool
	scratch         freelist.List[scratch] // one per worker, reused
}

// Attention computes p.Out (and p.LSE).
func (b *Backend) Attention(p *backend.Problem) error {
	workers := b.Workers()
	c := b.calls.Get()
	c.p, c.ks, c.d = p, b.ks, p.D
	c.pack = 1
	rowShape := p.Shape // the rows the blocks cover, per (batch, head) item
	if g := p.Group(); g > 1 && p.Sq < packBelow {
		c.pack = g
		rowShape.Hq, rowShape.Sq = p.Hkv, g*p.Sq
	}
	c.bq = QueryBlock(rowShape, workers)
	c.qBlocks = (rowShape.Sq + c.bq - 1) / c.bq
	c.items = p.B * rowShape.Hq * c.qBlocks
	c.panels = (p.Sk + panel - 1) / panel
	panels := p.B * p.Hkv * c.panels
	c.kt = freelist.Grow(c.kt, panels*p.D*panel)
	if p.Precision == backend.FP8E4M3 || p.Layout != backend.BHSD {
		c.vDec = freelist.Grow(c.vDec, p.B*p.Hkv*p.Sk*p.D) // V decoded or gathered, [B][Hkv][Sk][D]
	}
	// An FP8 problem's elements are E4M3 code values, each exactly a
	// bfloat16, but for GQA-packed query rows, scaled to one head's scale.
	exact := p.Precision == backend.FP8E4M3 && c.pack == 1
	c.amxOn = c.ks.amxUsable(p.D, min(c.bq, rowShape.Sq)) && (exact || !c.ks.amxExactOnly)
	c.amxExact = c.amxOn && exact && c.ks.amx.attend64 != nil // only the fused form leaves out the zero parts
	c.pairs = exact && c.ks.pairs != nil && p.D%16 == 0 && !c.amxOn
	if c.pairs {
		c.kt16 = freelist.Grow(c.kt16, panels*p.D/2*panel)
	}
	if c.amxOn {
		c.kAMX = freelist.Grow(c.kAMX, panels*amxPanelSize(p.D))
		c.vAMX = freelist.Grow(c.vAMX, panels*amxPanelSize(p.D))
		c.amxOK = freelist.Grow(c.amxOK, panels)
	}
	if cap(c.panelState) < panels {
		c.panelState = make([]atomic.Int32, panels)
	}
	c.panelState = c.panelState[:panels]
	for i := range c.panelState {
		c.panelState[i].Store(0)
	}
	b.run(c, workers)
	c.p = nil
	b.calls.Put(c)
	return nil
}

// run works through c's items on up to workers goroutines, the caller's
// included, and returns when all are done.
func (b *Backend) run(c *call, workers int) {
	if len(c.ranges) != workers {
		c.ranges = make([]blockRange, workers)
	}
	for r := range c.ranges {
		c.ranges[r].next.Store(int64(r * c.items / workers))
		c.ranges[r].end = int64((r + 1) * c.items / workers)
	}
	b.pool.Run(min(workers, c.items)-1, c)
}

// scratch is one worker's tile memory.
type scratch struct {
	q   []float32 // query rows, padded to a multiple of 4 (FP8: decoded)
	q16 []uint32  // q as bfloat16 pairs (call.pairs)
	k   []float32 // FP8: one key panel decoded, before transposing (paged: the panel)
	v   []float32 // paged: one panel of values, decoded
	s   []float32 // 4×panel scores, then weights
	// The AMX path's (amx.go): the block's query parts, 16 rows' scores
	// (then weights), their parts and P·V, and their rescale factors
	// (four past the rows: softmax4's scratch).
	qa, pa  []uint16
	s16, t  []float32
	alpha16 [amxRows + 4]float32
	group   amxGroup  // amxGroups' argument (here, not on the heap)
	acc     []float32 // query rows × D running output
	m, l    []float32 // running max and sum per query row
	f       []float32 // per query row: the output's factor (attendRows)
	// alpha: the rescale factors of one group of four rows, padded to one
	// AVX2 vector (here, not on the stack: the kernels take its address
	// through a function value).
	alpha [8]float32
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
	if c.pg != nil {
		sc.v = freelist.Grow(sc.v, panel*d)
	}
	sc.s = freelist.Grow(sc.s, 4*panel)
	sc.acc = freelist.Grow(sc.acc, rows*d)
	if c.amxOn {
		sc.qa = freelist.Grow(sc.qa, 3*rows*d)
		sc.pa = freelist.Grow(sc.pa, 3*amxRows*panel)
		sc.s16 = freelist.Grow(sc.s16, amxRows*panel)
		sc.t = freelist.Grow(sc.t, amxRows*d)
	}
	sc.m = freelist.Grow(sc.m, rows)
	sc.l = freelist.Grow(sc.l, rows)
	sc.f = freelist.Grow(sc.f, rows)
	return sc
}

// blockRange is one worker's contiguous range of query blocks [next, end),
// padded to a cache line of its own.
type blockRange struct {
	next atomic.Int64
	end  int64
	_    [48]byte
}

// Work is one worker's part of the call (par.Job): its own range of blocks
// first (worker w takes range w), then what is left of the others'.
func (c *call) Work(w int) {
	sc := c.getScratch()
	own := w % len(c.ranges)
	for k := range c.ranges {
		r := &c.ranges[(own+k)%len(c.ranges)]
		for {
			it := r.next.Add(1) - 1
			if it >= r.end {
				break
			}
			sc.next = -1
			if it+1 < r.end {
				sc.next = int(it + 1)
			}
			c.block(sc, int(it))
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
		for r := 0; r < n; r++ {
			src := p.Layout.Offset(b, h, j0+r, p.Hkv, p.Sk, D)
			kr, vr := k[r*D:(r+1)*D], c.vDec[off+r*D:off+(r+1)*D]
			if p.Precision == backend.FP8E4M3 {
				fp8Rows(kr, p, inK, src, kvh, 1)
				fp8Rows(vr, p, inV, src, kvh, 1)
			} else {
				copy(kr, p.K[src:src+D])
				copy(vr, p.V[src:src+D])
			}
		}
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
	bh, qb := it/c.qBlocks, it%c.qBlocks
	if p.Mask != backend.NoMask {
		qb = c.qBlocks - 1 - qb // causal: the blocks that see the most keys first
	}
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
		for r := 0; r < rowsN; r++ {
			src := p.Layout.Offset(b, h, i0+r, p.Hq, p.Sq, D)
			if p.Precision == backend.FP8E4M3 {
				fp8Rows(q[r*D:(r+1)*D], p, inQ, src, bh, 1)
			} else {
				copy(q[r*D:(r+1)*D], p.Q[src:src+D])
			}
		}
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
	kp.prefetch, kp.kvh = p.Layout == backend.BHSD, kvh
	if c.pairs {
		c.ks.pairs.rows(sc.q16[:rows*D/2], q)
		kp.pairs = true
	}
	sc.end = ahead{}
	if kp.prefetch && p.Mask == backend.NoMask {
		sc.end = c.blockEnd(sc.next, qOff, rowsN*D)
	}
	_, _, rowStride := p.Layout.Strides(p.Hq, p.Sq, D)
	c.attendRows(sc, q, rowsN, scoreScale, outScale, p.Out, blockRows{
		lseBuf: p.LSE, outStride: rowStride,
		visible: func(r int) int { return p.VisibleKeys(p.Mask, i0+r) },
		out: func(r int) int {
			if p.Layout != backend.BHSD {
				return p.Layout.Offset(b, h, i0+r, p.Hq, p.Sq, D)
			}
			return qOff + r*D
		},
		lse: func(r int) int { return bh*p.Sq + i0 + r },
	}, kp)
}

// blockRows says, for row r of a block, how many keys it sees and where its
// output and log-sum-exp go: attendRows's outBuf[out(r):][:D] and
// lseBuf[lse(r)] (no log-sum-exp where lseBuf is nil). Where outStride > 0,
// out(r) is out(0) + r·outStride for every row.
type blockRows struct {
	visible   func(r int) int
	out, lse  func(r int) int
	lseBuf    []float32
	outStride int
}

// keyPanels is the range of key panels [kb0, kb1) a block runs over, and
// how to get panel kb: its keys as the kernel set's transpose lays them out
// and its value rows (n×D floats, n the panel's keys).
type keyPanels struct {
	kb0, kb1 int
	get      func(kb int) (kt, v []float32)
	// prefetch says the steps (kernelSet.steps4) of each panel but the
	// last prefetch the next panel's inputs (panelInputs of KV head kvh);
	// those of the last prefetch the worker's scratch.end.
	prefetch bool
	kvh      int
	// pairs says the block's query rows are in scratch.q16 and KV head
	// kvh's key panels in call.kt16 as bfloat16 pairs too (call.pairs: the
	// set has pairKernels), for its steps. (Not slices here: a slice of kp
	// passed to a function value would move kp's closures to the heap.)
	pairs bool
	// amx, where not nil, gives panel kb's AMX operands, followed by the
	// next panels' (call after get), and whether the AMX path may take it.
	amx func(kb int) (kB, vB []uint16, ok bool)
}

// attendRows runs the online softmax of a block's rowsN query rows q
// (rounded up to four, zero rows after rowsN) against the key panels kp
// (keys kp.kb0·panel .. kp.kb1·panel-1, those a row sees) and writes each
// row's output (scaled by outScale) and log-sum-exp; a row that sees no key
// of the range gets zeros and -Inf.
func (c *call) attendRows(sc *scratch, q []float32, rowsN int, scoreScale, outScale float32, outBuf []float32, br blockRows, kp keyPanels) {
	ks, D := c.ks, c.d
	if ks.base2 {
		// The softmax in base 2: scores times log2e (kernelSet.base2),
		// and a positive scale, which the fused step's maxima need
		// (kernelSet.scoresSoftmax4).
		if s2 := float32(float64(scoreScale) * math.Log2E); s2 > 0 && !math.IsInf(float64(s2), 0) {
			scoreScale = s2
		} else {
			ks, kp.amx = ks.natural, nil
		}
	}
	rows := (rowsN + 3) &^ 3
	m, l, acc := sc.m[:rows], sc.l[:rows], sc.acc[:rows*D]
	negInf := float32(math.Inf(-1))
	for r := range m {
		m[r], l[r] = negInf, 0
	}
	clear(acc)
	s := sc.s[:4*panel]
	// The AMX path takes groups of 16 rows whose query parts AMX keeps
	// (amxRowsOK, a bit a group) against the full panels all their rows
	// see whose elements AMX keeps (amxAble): the loop below leaves those
	// to amxGroups, which runs them after it.
	var amxRowsOK uint64
	if kp.amx != nil {
		part := amxRows * D
		if c.amxExact {
			part = 0 // h alone: the exact form reads no other part
		}
		for g := 0; g+amxRows <= rowsN && g < 64*amxRows; g += amxRows {
			if ks.amx.splitRows(sc.qa[g*3*D:], part, D, q[g*D:], D, amxRows, D/32) {
				amxRowsOK |= 1 << (g / amxRows)
			}
		}
	}
	// Rows see keys [0, visible(i)); visible grows with i, so the last row
	// bounds the block's key range.
	nmax := min(br.visible(rowsN-1), kp.kb1*panel)
	amxAble := func(kb, g int) bool {
		if g%amxRows != 0 || amxRowsOK&(1<<(g/amxRows)) == 0 || (kb+1)*panel > nmax || br.visible(g) < (kb+1)*panel {
			return false
		}
		_, _, ok := kp.amx(kb)
		return ok
	}
	for kb := kp.kb0; kb*panel < nmax; kb++ {
		j0 := kb * panel
		n := min(panel, nmax-j0)
		kt, vb := kp.get(kb)
		vb = vb[:n*D]
		for g := 0; g < rowsN; g += 4 {
			if amxRowsOK != 0 && amxAble(kb, g) {
				g += amxRows - 4
				continue
			}
			qg, alpha := q[g*D:(g+4)*D], &sc.alpha
			if ks.steps4 != nil && amxRowsOK == 0 && n == panel && g+4 <= rowsN && br.visible(g) >= j0+panel {
				// This group and every later full one (visible keys only
				// grow with the row) in one call.
				e := rowsN &^ 3
				var pf ahead
				if kp.prefetch {
					pf = sc.end
					if kb+1 < kp.kb1 {
						pf = c.panelInputs(kp.kvh, kb+1)
					}
				}
				if kp.pairs {
					pi := kp.kvh*c.panels + kb
					ks.pairs.steps4(s, sc.q16[g*D/2:e*D/2], c.kt16[pi*D/2*panel:(pi+1)*D/2*panel], vb, acc[g*D:e*D], D, scoreScale, m[g:e], l[g:e], alpha, (e-g)/4, pf)
				} else {
					ks.steps4(s, q[g*D:e*D], kt, vb, acc[g*D:e*D], D, scoreScale, m[g:e], l[g:e], alpha, (e-g)/4, pf)
				}
				g = e - 4
				continue
			}
			if ks.scoresSoftmax4 != nil && n == panel && g+4 <= rowsN && br.visible(g) >= j0+panel {
				// Four full rows (visible keys only grow with the row).
				ks.scoresSoftmax4(s, qg, kt, D, scoreScale, m[g:g+4], l[g:g+4], alpha)
				ks.pv4(acc[g*D:(g+4)*D], s, vb, D, panel, (*[4]float32)(alpha[:4]))
				continue
			}
			ks.scores4(s, qg, kt, D, scoreScale)
			// Each row's softmax step over its own visible keys nr[r]:
			// new maxima first, then the four rescale factors
			// alpha = e^(m_old-m_new) in one vector exponential (e^0 = 1
			// exactly where a row has no old sum), then the rows.
			var nr [4]int
			*alpha = [8]float32{}
			common := n
			for r := range 4 {
				i := g + r
				if i >= rowsN { // padding: its output is never written
					continue
				}
				nr[r] = max(0, min(n, br.visible(i)-j0))
				common = min(common, nr[r])
				if nr[r] == 0 {
					continue
				}
				mOld := m[i]
				mNew := max(mOld, ks.rowMax(s[r*panel:r*panel+nr[r]]))
				if l[i] != 0 || mOld != mOld {
					alpha[r] = mOld - mNew
				}
				m[i] = mNew
			}
			ks.expSum(alpha[:], 0)
			for r := range 4 {
				if i := g + r; i < rowsN && nr[r] > 0 {
					l[i] = l[i]*alpha[r] + ks.expSum(s[r*panel:r*panel+nr[r]], m[i])
				}
			}
			// Keys every row sees go through pv4; a causal diagonal
			// leaves each row a few more (or, with no common key, all).
			if common > 0 {
				ks.pv4(acc[g*D:(g+4)*D], s, vb, D, common, (*[4]float32)(alpha[:4]))
			}
			for r := range 4 {
				if g+r >= rowsN || nr[r] <= common {
					continue
				}
				a := float32(1)
				if common == 0 {
					a = alpha[r]
				}
				ks.pv1(acc[(g+r)*D:(g+r+1)*D], s[r*panel+common:r*panel+nr[r]], vb[common*D:], D, nr[r]-common, a)
			}
		}
	}
	if amxRowsOK != 0 {
		c.amxGroups(sc, rowsN, kp, nmax, amxAble, scoreScale, m, l, acc)
	}
	seen := kp.kb0*panel + 1 // the keys a row must see to have an output
	// Each row's output is acc·(outScale/l); a row that sees no key has acc
	// 0, and a factor 0 makes its output 0.
	f := sc.f[:rowsN]
	for r := range f {
		f[r] = 0
		if br.visible(r) >= seen {
			f[r] = outScale / l[r]
		}
	}
	if br.outStride > 0 {
		ks.scaleRows(outBuf[br.out(0):], br.outStride, acc, D, f)
	} else {
		for r := range f {
			ks.scaleRows(outBuf[br.out(r):], D, acc[r*D:], D, f[r:r+1])
		}
	}
	if br.lseBuf == nil {
		return
	}
	// The log-sum-exps in a loop of their own, whose logarithms overlap.
	mScale := float32(1)
	if ks.base2 {
		mScale = math.Ln2
	}
	for r := 0; r < rowsN; r++ {
		lse := negInf
		if br.visible(r) >= seen {
			lse = m[r]*mScale + log32(l[r])
		}
		br.lseBuf[br.lse(r)] = lse
	}
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
// (a problem in layout BHSD, dense, unmasked): the query rows of block
// next, which the worker takes next, and, where that block's KV head's
// first panel is not built, its inputs (panelInputs); else the output rows
// [out, out+n) of the block, about to be written.
func (c *call) blockEnd(next, out, n int) ahead {
	p, D := c.p, c.d
	var pf ahead
	if next >= 0 {
		bh, qb := next/c.qBlocks, next%c.qBlocks
		i0 := qb * c.bq
		off := (bh*p.Sq + i0) * D
		end := off + (min(i0+c.bq, p.Sq)-i0)*D
		pf = c.panelInputs(bh/p.Hq*p.Hkv+bh%p.Hq/p.Group(), 0)
		pf.read[2] = inputSpan(p, inQ, off, end)
	}
	if pf.write[0].bytes == 0 {
		pf.write[0] = floatSpan(p.Out[out : out+n])
	}
	return pf
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
	kp.prefetch, kp.kvh = p.Layout == backend.BHSD, kvh
	sc.end = ahead{}
	c.attendRows(sc, q, rowsN, scoreScale, outScale, p.Out, blockRows{
		lseBuf:  p.LSE,
		visible: func(r int) int { _, i := head(r); return p.VisibleKeys(p.Mask, i) },
		out: func(r int) int {
			h, i := head(r)
			return p.Layout.Offset(b, h, i, p.Hq, p.Sq, D)
		},
		lse: func(r int) int { h, i := head(r); return (b*p.Hq+h)*p.Sq + i },
	}, kp)
}

// Default is the registered instance "cpu". The kernel sets are registered
// too, as "cpu/ISA" (see ISAs), for side-by-side runs; they are never picked
// automatically.
var Default = New(0)

func init() {
	backend.MustRegister(Default, 10)
	for _, isa := range ISAs() {
		b, _ := NewISA(0, isa)
		backend.MustRegister(b, -1)
	}
}

// String describes the backend for reports.
func (b *Backend) String() string {
	return fmt.Sprintf("%s(isa=%s, workers=%d)", b.name, b.ks.name, b.Workers())
}
