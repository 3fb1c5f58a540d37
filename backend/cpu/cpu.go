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
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fp8attn/fp8attn/backend"
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
// "avx512" elsewhere, where it measured slower (docs/design/cpu.md);
// "amx" (every problem on AMX tiles, selectable, never the default) with
// AMX-BF16; and always "go", the portable kernels.
func ISAs() []string {
	names := make([]string, len(kernelSets))
	for i, ks := range kernelSets {
		names[i] = ks.name
	}
	return names
}

// Name returns "cpu", or "cpu/ISA" for a backend made by NewISA ("" for a
// nil backend).
func (b *Backend) Name() string {
	if b == nil {
		return ""
	}
	return b.name
}

// ISA returns the name of the kernel set b uses ("" for a nil backend).
func (b *Backend) ISA() string {
	if b == nil || b.ks == nil {
		return ""
	}
	return b.ks.name
}

// QuantizesOnRead reports that the backend takes FP8E4M3 problems in float32
// to quantize as it reads them (backend.Problem.QuantizeOnRead): it computes
// on the codes' values in any case, so it rounds each element to its code's
// value where it would have decoded the code, and no codes are written or
// read.
func (*Backend) QuantizesOnRead(*backend.Problem) bool { return true }

// Supports accepts every valid problem: any shape, head dimension, mask,
// precision and attention variant.
func (*Backend) Supports(*backend.Problem) error { return nil }

// Workers returns the number of goroutines a call uses.
func (b *Backend) Workers() int {
	if b != nil && b.workers > 0 {
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
// through its own range from its front and then takes blocks from the
// backs of the others' (so a worker that starts late or runs slow delays
// no one, and a taker seldom needs the panels an owner is building).
// Contiguous blocks share a
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
	// vFinite, where the call has a mask or a window and the set a bounded
	// step or no fused one (shortRows), says whether each panel's value
	// rows are all finite (kernelSet.allFinite): a group's P·V may then
	// run over the keys of all its rows, each row's others weighing 0
	// exactly.
	vFinite []bool
	scratch freelist.List[scratch] // one per worker, reused
}

// Attention computes p.Out (and p.LSE). A nil backend (one not made by New
// or NewISA) or a nil problem is an error wrapping backend.ErrInvalid.
func (b *Backend) Attention(p *backend.Problem) error {
	if b == nil || b.ks == nil {
		return fmt.Errorf("%w: a nil or zero cpu backend (make one with cpu.New)", backend.ErrInvalid)
	}
	if p == nil {
		return fmt.Errorf("%w: a nil problem", backend.ErrInvalid)
	}
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
	// A softcap runs the bounded steps (kernelSet.stepsBounded4, or the
	// pairs' where the set has them) or the unfused ones: AMX and the
	// bfloat16 pairs' plain steps compute their softmax on raw scores.
	c.amxOn = c.ks.amxUsable(p.D, min(c.bq, rowShape.Sq)) && (exact || !c.ks.amxExactOnly) && p.Softcap == 0
	c.amxExact = c.amxOn && exact && c.ks.amx.attend64 != nil // only the fused form leaves out the zero parts
	c.pairs = exact && c.ks.pairs != nil && p.D%16 == 0 && !c.amxOn && (p.Softcap == 0 || c.ks.pairs.stepsBounded4 != nil)
	if c.pairs {
		c.kt16 = freelist.Grow(c.kt16, panels*p.D/2*panel)
	}
	if c.amxOn {
		c.kAMX = freelist.Grow(c.kAMX, panels*amxPanelSize(p.D))
		c.vAMX = freelist.Grow(c.vAMX, panels*amxPanelSize(p.D))
		c.amxOK = freelist.Grow(c.amxOK, panels)
	}
	c.vFinite = c.vFinite[:0]
	if (c.ks.scoresSoftmaxBounded4 != nil || c.ks.steps4 == nil) && (p.Mask != backend.NoMask || p.SlidingWindow > 0) {
		c.vFinite = freelist.Grow(c.vFinite, panels)
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
		c.ranges[r].set(r*c.items/workers, (r+1)*c.items/workers)
	}
	b.pool.Run(min(workers, c.items)-1, c)
}

// init registers New(0) as "cpu", and each kernel set as "cpu/ISA" (see
// ISAs) for side-by-side runs; the kernel sets are never picked
// automatically.
func init() {
	backend.MustRegister(New(0), 10)
	for _, isa := range ISAs() {
		b, _ := NewISA(0, isa)
		backend.MustRegister(b, -1)
	}
}

// String describes the backend for reports.
func (b *Backend) String() string {
	if b == nil || b.ks == nil {
		return "cpu(nil)"
	}
	return fmt.Sprintf("%s(isa=%s, workers=%d)", b.name, b.ks.name, b.Workers())
}
