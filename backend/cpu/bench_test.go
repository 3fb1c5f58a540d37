package cpu_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
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

// TestNoAllocs: after warm-up a call allocates nothing.
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
			if n := testing.AllocsPerRun(20, func() { be.Attention(p) }); n > 0 {
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
