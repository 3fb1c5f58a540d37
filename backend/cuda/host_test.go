//go:build cuda

package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/backend"
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

// TestHostSlicesBitExact: a call on float32 host slices (ScalesOnRead:
// copied up as they are through the page-locked ring, quantized on the
// device) gives, bit for bit, the output and LSE of the same inputs
// quantized on the host (fp8.QuantizeE4M3, Upload), on every stage this
// GPU runs that takes the shape: the one-tile form that quantizes its own
// inputs, quant_pack9, the quantization kernels (shapes quant_pack9 does
// not take, and the stages without it); GQA, both layouts, both causal
// masks, with and without LSE, non-finite inputs; regions of one chunk,
// of several, and larger than the ring both ways (slots reused). Every
// output element is written and none outside. A second call of each
// shape, on new inputs, reuses the pooled block and sees them.
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
				ref, _, _ := sdpatest.NewProblemLayout(c.s, in, c.scale, c.m, backend.FP8E4M3, c.l)
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
					p, out, lse := hostProblem(c.s, in, c.scale, c.m, c.l, c.lse)
					if err := p.Validate(); err != nil {
						t.Fatal(err)
					}
					if !b.ScalesOnRead(p) {
						t.Fatalf("stage %d: ScalesOnRead refuses %+v", st, c.s)
					}
					if err := errors.Join(b.Supports(p), b.Attention(p)); err != nil {
						t.Fatalf("stage %d round %d: host slices: %v", st, round, err)
					}
					checks := []error{out.Check("output")}
					if c.lse {
						checks = append(checks, lse.Check("LSE"))
					}
					if err := errors.Join(checks...); err != nil {
						t.Fatalf("stage %d round %d: %v", st, round, err)
					}
					if i := sameOrBothNaN(p.Out, ref.Out); i >= 0 {
						t.Fatalf("stage %d round %d: output %d is %g from host slices, %g quantized on the host", st, round, i, p.Out[i], ref.Out[i])
					}
					if c.lse {
						if i := sameOrBothNaN(p.LSE, ref.LSE); i >= 0 {
							t.Fatalf("stage %d round %d: LSE %d is %g from host slices, %g quantized on the host", st, round, i, p.LSE[i], ref.LSE[i])
						}
					}
				}
			}
		})
	}
}

// TestHostSlicesFactorError: a score factor beyond the limit (the host's
// Validate error for given scales) is the host-slice call's ErrInvalid,
// naming the overflow; the next call of the same shape, whose block the
// pool hands back with the flag still set, succeeds (the way up zeroes
// the flag), on the fused and the unfused paths.
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

// TestScalesOnRead: the backend takes float32 inputs with their scales
// left to it where its quantization grids take the heads, and not a nil
// problem, attention variants, too many heads or overflowing sizes.
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
		{"heads at the limit", &backend.Problem{Shape: backend.Shape{B: 5, Hq: hostMaxHeads / 5, Hkv: 1, Sq: 1, Sk: 1, D: 64}, Scale: 1}, true},
		{"heads past the limit", &backend.Problem{Shape: backend.Shape{B: 2, Hq: hostMaxHeads/2 + 1, Hkv: 1, Sq: 1, Sk: 1, D: 64}, Scale: 1}, false},
		{"a softcap", &backend.Problem{Shape: sdpatest.NamedShapes["mission"], Scale: 0.125, Variants: backend.Variants{Softcap: 30}}, false},
		{"overflowing", &backend.Problem{Shape: backend.Shape{B: 1 << 40, Hq: 1 << 20, Hkv: 1, Sq: 1 << 20, Sk: 1, D: 64}, Scale: 1}, false},
	} {
		if got := b.ScalesOnRead(tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHostLayout: a call's pieces in its device block are aligned and
// apart, in the block; the way up covers Q, K, V and the flag, the way
// down the flag, the output and the LSE (where asked), and nothing else;
// a fused call has no codes.
func TestHostLayout(t *testing.T) {
	for _, c := range []struct {
		s          backend.Shape
		lse, fused bool
	}{
		{sdpatest.NamedShapes["mission"], false, true},
		{backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 77, Sk: 130, D: 64}, true, true},
		{backend.Shape{B: 1, Hq: 3, Hkv: 1, Sq: 5, Sk: 9, D: 8}, true, false},
	} {
		p := &backend.Problem{Shape: c.s}
		if c.lse {
			p.LSE = []float32{}
		}
		s := c.s
		nq, nkv := s.B*s.Hq*s.Sq*s.D, s.B*s.Hkv*s.Sk*s.D
		l := newHostLayout(p, nq, nkv, c.fused)
		type piece struct {
			name      string
			off, size int
		}
		pieces := []piece{{"q", l.q, 4 * nq}, {"k", l.k, 4 * nkv}, {"v", l.v, 4 * nkv}, {"flag", l.flag, 4}, {"out", l.out, 4 * nq},
			{"q scales", l.scales[0], 4 * s.B * s.Hq}, {"k scales", l.scales[1], 4 * s.B * s.Hkv}, {"v scales", l.scales[2], 4 * s.B * s.Hkv}}
		if c.lse {
			pieces = append(pieces, piece{"lse", l.lse, 4 * s.B * s.Hq * s.Sq})
		}
		if !c.fused {
			pieces = append(pieces, piece{"q codes", l.codes[0], nq}, piece{"k codes", l.codes[1], nkv}, piece{"v codes", l.codes[2], nkv})
		} else if l.codes != [3]int{} {
			t.Errorf("%+v: a fused call has codes at %v", s, l.codes)
		}
		for i, a := range pieces {
			if a.off%stagingAlign != 0 || a.off < 0 || a.off+a.size > l.total {
				t.Errorf("%+v: %s at %d (%d bytes) in a block of %d", s, a.name, a.off, a.size, l.total)
			}
			for _, b := range pieces[:i] {
				if a.off < b.off+b.size && b.off < a.off+a.size {
					t.Errorf("%+v: %s and %s overlap", s, a.name, b.name)
				}
			}
		}
		down := l.out + 4*nq
		if c.lse {
			down = l.lse + 4*s.B*s.Hq*s.Sq
		}
		if l.up != l.flag+4 || l.q != 0 || l.k < l.q || l.v < l.k || l.flag < l.v || l.down != down-l.flag || l.out < l.flag {
			t.Errorf("%+v: up %d, down %d from the flag at %d, out at %d", s, l.up, l.down, l.flag, l.out)
		}
	}
}

// TestHostCatchesMutants: the host path's flag and output handling, broken
// on purpose, fail its tests (FP8ATTN_MUTANTS=1, -tags cuda on a GPU).
func TestHostCatchesMutants(t *testing.T) {
	const pkg = "./backend/cuda"
	mutant.Run(t, []mutant.Mutant{
		{Name: "the flag is not zeroed on the way up", File: "backend/cuda/host.go", Pkg: pkg,
			Old: "{l.flag, zeroWord[:]}}", New: "{l.flag, nil}}",
			Tests: []string{"TestHostSlicesFactorError"}},
		{Name: "the LSE does not come down", File: "backend/cuda/host.go", Pkg: pkg,
			Old: "segs = append(segs, hostSeg{l.lse - l.flag, bytesOf(p.LSE)})", New: "segs = append(segs, hostSeg{l.lse - l.flag, nil})",
			Tests: []string{"TestHostSlicesBitExact"}},
		{Name: "the unfused path quantizes K as Q", File: "backend/cuda/host.go", Pkg: pkg,
			Old: "ts[i] = quantTensorOf(src[i], in[i], in[3+i],", New: "ts[i] = quantTensorOf(src[i/2], in[i], in[3+i],",
			Tests: []string{"TestHostSlicesBitExact"}},
	})
}

// BenchmarkHostSlices: the backend's call on float32 host slices (the
// ScalesOnRead problem sdpa hands it for an FP8 call), host-timed per
// call: the copies both ways, quantization and attention; the mission
// shape and B1 Hq32 Hkv8 S4096 D128. "us/call" is the median of the
// calls; the upload path of host-quantized codes (the path before) runs
// beside it as "us/host-quantized" (codes already made, so its host
// quantization is not counted).
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
