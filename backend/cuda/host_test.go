//go:build cuda

package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/half"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/internal/mutant"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// hostProblem is the host-slice problem of in (BHSD [B][H][S][D], permuted
// to l): float32 inputs, scales and quantization left to the backend
// (ScalesOnRead), output and LSE (with lse) in poisoned guarded buffers.
func hostProblem(s backend.Shape, in sdpatest.Inputs, scale float32, m backend.Mask, l backend.Layout, lse bool) (*backend.Problem, *sdpatest.Guarded, *sdpatest.Guarded) {
	perm := func(x []float32, h, n int) []float32 {
		if l == backend.BHSD {
			return x
		}
		return layout.Permute(x, s.B, h, n, s.D, l)
	}
	out, lg := sdpatest.NewGuarded(s.B*s.Hq*s.Sq*s.D), sdpatest.NewGuarded(s.B*s.Hq*s.Sq)
	p := &backend.Problem{Shape: s, Scale: scale, Mask: m, Layout: l, Precision: backend.FP8E4M3, QuantizeOnRead: true, ScalesOnRead: true,
		Q: perm(in.Q, s.Hq, s.Sq), K: perm(in.K, s.Hkv, s.Sk), V: perm(in.V, s.Hkv, s.Sk), Out: out.Data()}
	if lse {
		p.LSE = lg.Data()
	}
	return p, out, lg
}

// encoded turns host problem p (ScalesOnRead) into the one sdpa hands a
// backend that encodes on the host: the same float32 inputs, with each
// (batch, head)'s scale computed as fp8.QuantizeE4M3 does.
func encoded(p *backend.Problem) *backend.Problem {
	e := *p
	e.ScalesOnRead = false
	s := p.Shape
	scales := func(x []float32, h, n int) []float32 {
		sc := make([]float32, s.B*h)
		for g := range sc {
			var amax float32
			p.Layout.HeadRuns(g/h, g%h, h, n, s.D, func(o, n int) { amax = max(amax, fp8.Amax(x[o:o+n])) })
			sc[g] = fp8.ScaleForAmax(amax)
		}
		return sc
	}
	e.QScale, e.KScale, e.VScale = scales(p.Q, s.Hq, s.Sq), scales(p.K, s.Hkv, s.Sk), scales(p.V, s.Hkv, s.Sk)
	return &e
}

// sameOrBothNaN reports the first index where got and want differ in bits
// (two NaNs agree: the paths may carry different payloads), or -1.
func sameOrBothNaN(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			return i
		}
	}
	return -1
}

// halfRounded is what a host-slice call on ref's inputs brings down: ref's
// output (its codes uploaded, float32 out) rounded to float16 at
// half.Scale of its V scales (half.RoundOutput).
func halfRounded(ref *backend.Problem) []float32 {
	want := slices.Clone(ref.Out)
	half.RoundOutput(want, ref.VScale)
	return want
}

// TestHostSlicesBitExact: a call on float32 host slices (QuantizeOnRead:
// encoded into the page-locked ring on the host, its scales computed
// there too (ScalesOnRead) or given) gives, bit for bit, the LSE of the
// same inputs quantized by fp8.QuantizeE4M3 and uploaded, and its output
// rounded to float16 at half.Scale of V's scales (half.Round), on
// every stage this GPU runs that takes the shape; GQA, both layouts, both
// causal masks, with and without LSE, non-finite inputs; regions of one
// chunk, of several, and larger than the ring both ways (slots reused).
// Every output element is written and none outside, by the host-slice
// call and by the kernels on the uploaded codes (their poisoned device
// outputs downloaded as they are). A second call of
// each shape, on new inputs, runs on the kept call and sees them.
func TestHostSlicesBitExact(t *testing.T) {
	if _, err := openDevice(0); err != nil {
		t.Fatal(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 80))
	for _, c := range []struct {
		name      string
		s         backend.Shape
		m         backend.Mask
		l         backend.Layout
		scale     float32
		lse       bool
		nonFinite bool
		allStages bool // also on every other stage that takes it (small shapes)
	}{
		{"mission", sdpatest.NamedShapes["mission"], backend.NoMask, backend.BHSD, 0.125, true, false, true},
		{"gqa-bshd", backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 77, Sk: 130, D: 64}, backend.CausalLowerRight, backend.BSHD, -0.2, true, false, true},
		{"quant-pack", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 300, Sk: 256, D: 64}, backend.CausalUpperLeft, backend.BSHD, 0.125, false, false, true},
		{"d128", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 33, Sk: 75, D: 128}, backend.CausalLowerRight, backend.BSHD, 0.09, true, false, true},
		{"non-finite", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 256, Sk: 256, D: 64}, backend.NoMask, backend.BHSD, 0.125, true, true, false},
		{"unfused", backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 1024, Sk: 1024, D: 128}, backend.NoMask, backend.BHSD, 0.088, false, false, false},
		{"past-the-ring", backend.Shape{B: 1, Hq: 16, Hkv: 4, Sq: 2048, Sk: 2048, D: 128}, backend.CausalLowerRight, backend.BHSD, 0.088, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			stages := []int{0}
			if c.allStages {
				stages = append(stages, runnableStages(t)...)
			}
			for round := range 2 {
				in := sdpatest.RandomInputs(rng, c.s, 1+float64(round))
				if c.nonFinite {
					nonFinite(c.s, in)
				}
				ref, refOut, refLSE := sdpatest.NewProblemLayout(c.s, in, c.scale, c.m, backend.FP8E4M3, c.l)
				if !c.lse {
					ref.LSE = nil
				}
				if err := ref.Validate(); err != nil {
					t.Fatal(err)
				}
				for _, st := range stages {
					if st != 0 && supports(ref, st) != nil {
						continue
					}
					b := testBackend(st)
					if err := b.Attention(ref); err != nil {
						t.Fatalf("stage %d, host-quantized: %v", st, err)
					}
					// The kernels write every element (the host-slice call's
					// output comes through float16, where the device's poison
					// is an ordinary NaN).
					refChecks := []error{refOut.Check("output, quantized first")}
					if c.lse {
						refChecks = append(refChecks, refLSE.Check("LSE, quantized first"))
					}
					if err := errors.Join(refChecks...); err != nil {
						t.Fatalf("stage %d: %v", st, err)
					}
					want := halfRounded(ref)
					for _, given := range []bool{false, true} {
						p, out, lse := hostProblem(c.s, in, c.scale, c.m, c.l, c.lse)
						if given {
							p = encoded(p)
						}
						if err := p.Validate(); err != nil {
							t.Fatal(err)
						}
						if !b.ScalesOnRead(p) {
							t.Fatalf("stage %d: ScalesOnRead refuses %+v", st, c.s)
						}
						if err := errors.Join(b.Supports(p), b.Attention(p)); err != nil {
							t.Fatalf("stage %d round %d, scales given %v: host slices: %v", st, round, given, err)
						}
						checks := []error{out.Check("output")}
						if c.lse {
							checks = append(checks, lse.Check("LSE"))
						}
						if err := errors.Join(checks...); err != nil {
							t.Fatalf("stage %d round %d, scales given %v: %v", st, round, given, err)
						}
						if i := sameOrBothNaN(p.Out, want); i >= 0 {
							t.Fatalf("stage %d round %d, scales given %v: output %d is %g from host slices, %g quantized first and rounded (%g before)", st, round, given, i, p.Out[i], want[i], ref.Out[i])
						}
						if c.lse {
							if i := sameOrBothNaN(p.LSE, ref.LSE); i >= 0 {
								t.Fatalf("stage %d round %d, scales given %v: LSE %d is %g from host slices, %g quantized first", st, round, given, i, p.LSE[i], ref.LSE[i])
							}
						}
					}
				}
			}
		})
	}
}

// TestHostSlicesFactorError: a score factor beyond the limit (the host's
// Validate error for given scales) is the host-slice call's ErrInvalid,
// naming the overflow; the next call of the same shape, on the kept
// call's block with the flag still set, succeeds (the way up zeroes the
// flag), on the one-tile and the tiled kernels.
func TestHostSlicesFactorError(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 81))
	b := testBackend(0)
	for _, s := range []backend.Shape{{B: 1, Hq: 2, Hkv: 1, Sq: 8, Sk: 200, D: 64}, {B: 1, Hq: 2, Hkv: 1, Sq: 600, Sk: 600, D: 128}} {
		in := sdpatest.RandomInputs(rng, s, 1)
		p, _, _ := hostProblem(s, in, 1e38, backend.NoMask, backend.BHSD, false)
		if err := b.Attention(p); !errors.Is(err, backend.ErrInvalid) || err != nil && !strings.Contains(err.Error(), "overflow") {
			t.Errorf("%+v: scale 1e38: %v, want ErrInvalid naming the overflow", s, err)
		}
		p, out, _ := hostProblem(s, in, 0.1, backend.NoMask, backend.BHSD, false)
		if err := errors.Join(b.Attention(p), out.Check("output")); err != nil {
			t.Errorf("%+v: the call after the refused one: %v", s, err)
		}
	}
}

// TestHostCallKept: the device keeps the last host-slice call's block and
// resident for the next call of its key (the same block, and results
// that follow the new inputs: the uploaded codes' output, rounded as the
// call brings it down), a call of another key replaces it, a call
// with attention variants keeps none of its own, and a trim of the pool
// (a memory bound) releases it.
func TestHostCallKept(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 83))
	b := testBackend(0)
	kept := func() (hostKey, pooled, bool) {
		var k hostKey
		var blk pooled
		ok := false
		d.do(func() error {
			if c := d.hostCall; c != nil {
				k, blk, ok = c.key, c.blk, true
			}
			return nil
		})
		return k, blk, ok
	}
	call := func(s backend.Shape, v backend.Variants) *backend.Problem {
		in := sdpatest.RandomInputs(rng, s, 1)
		p, out, _ := hostProblem(s, in, 0.125, backend.NoMask, backend.BHSD, false)
		p.Variants = v
		ref, refOut, _ := sdpatest.NewProblemLayout(s, in, 0.125, backend.NoMask, backend.FP8E4M3, backend.BHSD)
		ref.LSE, ref.Variants = nil, v
		if err := errors.Join(b.Attention(p), b.Attention(ref), out.Check("output"), refOut.Check("output, quantized first")); err != nil {
			t.Fatal(err)
		}
		want := halfRounded(ref)
		if i := sameOrBothNaN(p.Out, want); i >= 0 {
			t.Fatalf("%+v: output %d is %g, %g quantized first and rounded", s, i, p.Out[i], want[i])
		}
		return p
	}
	a, c := backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 64, Sk: 200, D: 64}, backend.Shape{B: 2, Hq: 2, Hkv: 2, Sq: 33, Sk: 70, D: 128}
	call(a, backend.Variants{})
	k1, at1, ok := kept()
	if !ok || k1.shape != a {
		t.Fatalf("after a call of %+v the device keeps %+v (%v)", a, k1, ok)
	}
	call(a, backend.Variants{})
	if k, at, ok := kept(); !ok || k != k1 || at != at1 {
		t.Errorf("a second call of the key: kept %+v in %+v (%v), want %+v in %+v", k, at, ok, k1, at1)
	}
	call(c, backend.Variants{})
	if k, _, ok := kept(); !ok || k.shape != c {
		t.Errorf("a call of another key: kept %+v (%v), want its own", k, ok)
	}
	call(a, backend.Variants{Softcap: 20})
	if k, _, ok := kept(); !ok || k.shape != c {
		t.Errorf("a call with a softcap: kept %+v (%v), want the call before's", k, ok)
	}
	_, blk, _ := kept()
	held := d.MemoryHeld()
	if err := d.do(d.trimPool); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := kept(); ok || d.MemoryHeld() > held-blk.size {
		t.Errorf("after a trim the device keeps a call (%v), holds %d bytes of %d (the kept block: %d)", ok, d.MemoryHeld(), held, blk.size)
	}
}

// TestScalesOnRead: the backend takes float32 inputs with their scales
// left to it for every shape whose sizes it takes, attention variants
// and many heads included, and not a nil problem or overflowing sizes.
func TestScalesOnRead(t *testing.T) {
	var b kernelBackend
	for _, tc := range []struct {
		name string
		p    *backend.Problem
		want bool
	}{
		{"nil", nil, false},
		{"mission", &backend.Problem{Shape: sdpatest.NamedShapes["mission"], Scale: 0.125}, true},
		{"large", &backend.Problem{Shape: backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128}, Scale: 0.088}, true},
		{"many heads", &backend.Problem{Shape: backend.Shape{B: 2, Hq: 40000, Hkv: 1, Sq: 1, Sk: 1, D: 64}, Scale: 1}, true},
		{"a softcap", &backend.Problem{Shape: sdpatest.NamedShapes["mission"], Scale: 0.125, Variants: backend.Variants{Softcap: 30}}, true},
		{"overflowing", &backend.Problem{Shape: backend.Shape{B: 1 << 40, Hq: 1 << 20, Hkv: 1, Sq: 1 << 20, Sk: 1, D: 64}, Scale: 1}, false},
		{"a NaN scale", &backend.Problem{Shape: sdpatest.NamedShapes["mission"], Scale: float32(math.NaN())}, false},
	} {
		if got := b.ScalesOnRead(tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHostLayout: a call's pieces in its device block are aligned and
// apart, in the block; the way up covers the codes, their scales and the
// flag, the way down the flag, the output and the LSE (where asked), and
// nothing else.
func TestHostLayout(t *testing.T) {
	for _, c := range []struct {
		s   backend.Shape
		lse bool
	}{
		{sdpatest.NamedShapes["mission"], false},
		{backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 77, Sk: 130, D: 64}, true},
		{backend.Shape{B: 1, Hq: 3, Hkv: 1, Sq: 5, Sk: 9, D: 8}, true},
		{backend.Shape{B: 1, Hq: 3, Hkv: 1, Sq: 5, Sk: 9, D: 8}, false},
	} {
		p := &backend.Problem{Shape: c.s}
		if c.lse {
			p.LSE = []float32{}
		}
		s := c.s
		nq, nkv := s.B*s.Hq*s.Sq*s.D, s.B*s.Hkv*s.Sk*s.D
		l := newHostLayout(p, nq, nkv)
		type piece struct {
			name      string
			off, size int
			up        bool
		}
		pieces := []piece{{"q", l.q, nq, true}, {"k", l.k, nkv, true}, {"v", l.v, nkv, true}, {"flag", l.flag, 4, true},
			{"q scales", l.scales[0], 4 * s.B * s.Hq, true}, {"k scales", l.scales[1], 4 * s.B * s.Hkv, true},
			{"v scales", l.scales[2], 4 * s.B * s.Hkv, true}, {"out16", l.out16, 2 * nq, false}, {"out", l.out, 4 * nq, false}}
		if c.lse {
			pieces = append(pieces, piece{"lse", l.lse, 4 * s.B * s.Hq * s.Sq, false})
		}
		for i, a := range pieces {
			if a.off%stagingAlign != 0 || a.off < 0 || a.off+a.size > l.total {
				t.Errorf("%+v: %s at %d (%d bytes) in a block of %d", s, a.name, a.off, a.size, l.total)
			}
			if a.up != (a.off+a.size <= l.up) {
				t.Errorf("%+v: %s at %d (%d bytes), the way up %d bytes", s, a.name, a.off, a.size, l.up)
			}
			for _, b := range pieces[:i] {
				if a.off < b.off+b.size && b.off < a.off+a.size {
					t.Errorf("%+v: %s and %s overlap", s, a.name, b.name)
				}
			}
		}
		down := l.out16 + 2*nq
		if c.lse {
			down = l.lse + 4*s.B*s.Hq*s.Sq
		}
		if l.up != l.flag+4 || l.q != 0 || l.down != down-l.flag || l.out16 < l.flag || l.out < l.flag+l.down {
			t.Errorf("%+v: up %d, down %d from the flag at %d, out16 at %d, out at %d", s, l.up, l.down, l.flag, l.out16, l.out)
		}
	}
}

// TestHostCatchesMutants: the host path's output handling, broken on
// purpose, fails its tests (FP8ATTN_MUTANTS=1, -tags cuda on a GPU; the
// mutants of its flag, kept call and float16 output are in package
// gpumutants).
func TestHostCatchesMutants(t *testing.T) {
	const pkg = "./backend/cuda"
	mutant.Run(t, []mutant.Mutant{
		{Name: "the LSE does not come down", File: "backend/cuda/host_engine.go", Pkg: pkg,
			Old: "segs = append(segs, hostSeg{off: l.lse - l.flag, host: bytesOf(p.LSE)})", New: "segs = append(segs, hostSeg{off: l.lse - l.flag})",
			Tests: []string{"TestHostSlicesBitExact"}},
		{Name: "an upload encodes with the scales of Q's first head", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "fp8.EncodeE4M3(codes, s.x[e:e+n], s.scales[g], fp8.NoSat)", New: "fp8.EncodeE4M3(codes, s.x[e:e+n], s.scales[0], fp8.NoSat)",
			Tests: []string{"TestHostSlicesBitExact"}},
	})
}

// BenchmarkHostSlices: the backend's call on float32 host slices (the
// ScalesOnRead problem sdpa hands it for an FP8 call), host-timed per
// call: the scales, the encoding, the copies both ways and the attention;
// the mission shape and B1 Hq32 Hkv8 S4096 D128. "us/call" is the median
// of the calls; the call on codes quantized beforehand (Upload: one
// staged copy up, one down) runs beside it as "us/host-quantized" (its
// quantization not counted).
func BenchmarkHostSlices(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	be := &kernelBackend{name: "cuda"}
	for _, c := range []struct {
		name string
		s    backend.Shape
	}{
		{"mission", sdpatest.NamedShapes["mission"]},
		{"B1-Hq32-Hkv8-S4096-D128", backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128}},
	} {
		in := sdpatest.RandomInputs(rng, c.s, 1)
		scale := float32(1 / math.Sqrt(float64(c.s.D)))
		p, _, _ := hostProblem(c.s, in, scale, backend.NoMask, backend.BHSD, false)
		ref, _, _ := sdpatest.NewProblem(c.s, in, scale, backend.NoMask, backend.FP8E4M3)
		ref.LSE = nil
		b.Run(c.name, func(b *testing.B) {
			if err := errors.Join(be.Attention(p), be.Attention(ref)); err != nil { // opens the device, fills the pool
				b.Fatal(err)
			}
			var times []float64
			for b.Loop() {
				start := time.Now()
				if err := be.Attention(p); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start).Seconds()*1e6)
			}
			var old []float64
			for range min(len(times), 50) {
				start := time.Now()
				if err := be.Attention(ref); err != nil {
					b.Fatal(err)
				}
				old = append(old, time.Since(start).Seconds()*1e6)
			}
			b.ReportMetric(median(times), "us/call")
			b.ReportMetric(median(old), "us/host-quantized")
			b.Logf("%s: %d calls, median %.1f µs, host-quantized codes %.1f µs", c.name, len(times), median(times), median(old))
		})
	}
}
