package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/allocs"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

var benchShapes = []struct {
	name string
	s    backend.Shape
}{
	{"small", sdpatest.NamedShapes["small"]},
	{"mission", sdpatest.NamedShapes["mission"]},
	{"long", sdpatest.NamedShapes["long"]},
}

func benchProblem(s backend.Shape, prec backend.Precision) *backend.Problem {
	rng := rand.New(rand.NewPCG(1, 2))
	p, _, _ := sdpatest.NewProblem(s, sdpatest.RandomInputs(rng, s, 1), float32(1/math.Sqrt(float64(s.D))), backend.NoMask, prec)
	return p
}

func report(b *testing.B, s backend.Shape) {
	b.ReportMetric(s.FLOPs(backend.NoMask)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkCPU: the CPU backend on GOMAXPROCS workers, with each kernel set
// this CPU runs.
func BenchmarkCPU(b *testing.B) {
	for _, sh := range benchShapes {
		for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
			for _, isa := range cpu.ISAs() {
				b.Run(sh.name+"/"+prec.String()+"/"+isa, func(b *testing.B) {
					p := benchProblem(sh.s, prec)
					be, err := cpu.NewISA(0, isa)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						if err := be.Attention(p); err != nil {
							b.Fatal(err)
						}
					}
					report(b, sh.s)
				})
			}
		}
	}
}

// BenchmarkReference: the naive float64 oracle, the baseline docs/design/cpu.md
// compares against (small and mission; long takes seconds per call).
func BenchmarkReference(b *testing.B) {
	for _, sh := range benchShapes[:2] {
		b.Run(sh.name+"/fp32", func(b *testing.B) {
			p := benchProblem(sh.s, backend.FP32)
			for b.Loop() {
				oracle.Naive(p)
			}
			report(b, sh.s)
		})
	}
}

// TestNoAllocs: after warm-up a call allocates nothing (allocs.PerCall:
// the runtime's own caches may take some calls to settle).
func TestNoAllocs(t *testing.T) {
	bes := []*cpu.Backend{cpu.New(2)}
	for _, isa := range cpu.ISAs() {
		be, err := cpu.NewISA(2, isa)
		if err != nil {
			t.Fatal(err)
		}
		bes = append(bes, be)
	}
	if be, ok := cpu.NewAMXEmulated(2); ok {
		bes = append(bes, be)
	}
	for _, be := range bes {
		for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
			p := benchProblem(benchShapes[0].s, prec)
			be.Attention(p)
			if n := allocs.PerCall(20, func() { be.Attention(p) }); n > 0 {
				t.Errorf("%v %v: %v allocations per call", be, prec, n)
			}
		}
	}
}

// BenchmarkPeakFMA: the fused multiply-adds one core issues a second on
// registers alone, per SIMD kernel set: the ceiling for BenchmarkKernels
// and BenchmarkCPU at one thread (4·B·H·Sq·Sk·D flops of attention are
// that many FMA lanes, plus the softmax's instructions on the same ports).
func BenchmarkPeakFMA(b *testing.B) {
	for _, isa := range []string{"avx512", "avx2"} {
		b.Run(isa, func(b *testing.B) {
			if !slices.Contains(cpu.ISAs(), isa) {
				b.Skip("no " + isa + " on this CPU or build")
			}
			flops := 0.0
			for b.Loop() {
				flops += cpu.FMAPeak(isa, 1<<14)
			}
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkWorkers: the default kernel set on 1 and 2 workers (a pool of
// its own each; "w2park" with helpers that park at once instead of
// polling), the mission shape and a long one. Run it with a core busy
// (taskset -c 1 yes >/dev/null) to see what a second worker gives when it
// gets only part of a core.
func BenchmarkWorkers(b *testing.B) {
	for _, sh := range []struct {
		name string
		s    backend.Shape
	}{
		{"mission", sdpatest.NamedShapes["mission"]},
		{"B1H8S1024D64", backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 1024, Sk: 1024, D: 64}},
	} {
		for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
			for _, w := range []struct {
				name string
				c    cpu.Config
			}{{"w1", cpu.Config{Workers: 1}}, {"w2", cpu.Config{Workers: 2}}, {"w2park", cpu.Config{Workers: 2, Spin: -1}}} {
				b.Run(fmt.Sprintf("%s/%v/%s", sh.name, prec, w.name), func(b *testing.B) {
					p := benchProblem(sh.s, prec)
					be, err := cpu.NewConfig("cpu", w.c)
					if err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						if err := be.Attention(p); err != nil {
							b.Fatal(err)
						}
					}
					report(b, sh.s)
				})
			}
		}
	}
}

// BenchmarkLayoutPaired: the default backend on the same causal GQA
// problem (Hq32 Hkv8 S512 D128) in layouts BHSD and BSHD, timed call by
// call in adjacent pairs, the order alternating, so that a shared
// machine's drift falls on both alike: "bshd/bhsd" is the median over
// pairs of t(BSHD)/t(BHSD), "bhsd-ms" and "bshd-ms" the per-call medians.
// FP8 runs both with codes (fp8) and quantizing on read (fp8-onread, as
// sdpa's FP8 call hands float32 tensors over).
func BenchmarkLayoutPaired(b *testing.B) {
	s := backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 512, Sk: 512, D: 128}
	for _, c := range []struct {
		name   string
		prec   backend.Precision
		onRead bool
	}{{"fp32", backend.FP32, false}, {"fp8", backend.FP8E4M3, false}, {"fp8-onread", backend.FP8E4M3, true}} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			in := sdpatest.RandomInputs(rng, s, 1)
			var ps [2]*backend.Problem
			for i, l := range []backend.Layout{backend.BHSD, backend.BSHD} {
				p, _, _ := sdpatest.NewProblemLayout(s, in, float32(1/math.Sqrt(float64(s.D))), backend.CausalUpperLeft, c.prec, l)
				if c.onRead {
					p.Q, p.K, p.V = dequantize(p.Q8, p.QScale, p, p.Hq, p.Sq), dequantize(p.K8, p.KScale, p, p.Hkv, p.Sk), dequantize(p.V8, p.VScale, p, p.Hkv, p.Sk)
					p.Q8, p.K8, p.V8, p.QuantizeOnRead = nil, nil, nil, true
				}
				ps[i] = p
			}
			be := cpu.New(0)
			timed := func(p *backend.Problem) float64 {
				start := time.Now()
				if err := be.Attention(p); err != nil {
					b.Fatal(err)
				}
				return time.Since(start).Seconds()
			}
			var t0, t1, ratios []float64
			for b.Loop() {
				var x, y float64
				if len(ratios)%2 == 0 {
					x, y = timed(ps[0]), timed(ps[1])
				} else {
					y, x = timed(ps[1]), timed(ps[0])
				}
				t0, t1, ratios = append(t0, x), append(t1, y), append(ratios, y/x)
			}
			b.ReportMetric(median(ratios), "bshd/bhsd")
			b.ReportMetric(median(t0)*1e3, "bhsd-ms")
			b.ReportMetric(median(t1)*1e3, "bshd-ms")
		})
	}
}

// median returns the median of x (x is reordered); NaN for none.
func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	slices.Sort(x)
	if n := len(x); n%2 == 0 {
		return (x[n/2-1] + x[n/2]) / 2
	}
	return x[len(x)/2]
}
