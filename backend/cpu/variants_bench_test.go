package cpu_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// visibleFLOPs is 4·B·Hq·D times the keys p's rows see (mask and window).
func visibleFLOPs(p *backend.Problem) float64 {
	var keys float64
	for i := range p.Sq {
		lo, hi := p.KeyRange(i)
		keys += float64(max(0, hi-lo))
	}
	return 4 * float64(p.B*p.Hq*p.D) * keys
}

// BenchmarkVariants: the attention variants on one worker against the plain
// calls, in GFLOP/s of visible work (the keys each row sees, so that a
// window's saving is not counted as speed): the CPU target is each variant
// within 1.1x of the plain call's time per visible key. For a softcap or
// sinks the plain call is the same causal call without them; for a window
// W it is also the unmasked call of every row against W keys ("plain-Wk"),
// whose rows see as many keys as the window's.
// Shapes after the models that use them: Gemma 2 (D 256, softcap 50,
// window 1024), gpt-oss (Hq 64, Hkv 8, D 64, sinks, window 128), Mistral
// (D 128, window 1024), scaled down to a CPU's call.
func BenchmarkVariants(b *testing.B) {
	type variant struct {
		name string
		v    backend.Variants
	}
	for _, sh := range []struct {
		name     string
		s        backend.Shape
		variants []variant
	}{
		{"mistral", backend.Shape{B: 1, Hq: 8, Hkv: 2, Sq: 2048, Sk: 2048, D: 128}, []variant{{"window1024", backend.Variants{SlidingWindow: 1024}}}},
		{"gemma2", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 2048, Sk: 2048, D: 256}, []variant{
			{"softcap50", backend.Variants{Softcap: 50}}, {"softcap50-window1024", backend.Variants{Softcap: 50, SlidingWindow: 1024}}}},
		{"gpt-oss", backend.Shape{B: 1, Hq: 64, Hkv: 8, Sq: 512, Sk: 512, D: 64}, []variant{
			{"sinks", backend.Variants{Sinks: make([]float32, 64)}}, {"sinks-window128", backend.Variants{Sinks: make([]float32, 64), SlidingWindow: 128}}}},
	} {
		for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
			runs := []variant{{"plain", backend.Variants{}}}
			for _, v := range sh.variants {
				if w := v.v.SlidingWindow; w > 0 {
					runs = append(runs, variant{"plain-" + strconv.Itoa(w) + "k", backend.Variants{SlidingWindow: -w}})
				}
			}
			for _, v := range append(runs, sh.variants...) {
				b.Run(sh.name+"/"+prec.String()+"/"+v.name, func(b *testing.B) {
					rng := rand.New(rand.NewPCG(1, 2))
					s, m := sh.s, backend.CausalLowerRight
					if v.v.SlidingWindow < 0 { // the same visible work without a window
						s.Sk, m, v.v = -v.v.SlidingWindow, backend.NoMask, backend.Variants{}
					}
					p, _, _ := sdpatest.NewProblem(s, sdpatest.RandomInputs(rng, s, 1), float32(1/math.Sqrt(float64(s.D))), m, prec)
					p.Variants = v.v
					be := cpu.New(1)
					for b.Loop() {
						if err := be.Attention(p); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(visibleFLOPs(p)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkVariantsPaired: the CPU target of BenchmarkVariants as one
// figure a variant, its time per visible key over the plain call's (the
// faster of the causal call and, for a window W, the unmasked call of W
// keys), the calls timed one after another in each iteration (the order
// turned each time) and the median of the iterations' ratios reported: on a
// machine shared with other work, the calls of one iteration see the same
// load. One worker. Also the medians of each call's time per visible key.
func BenchmarkVariantsPaired(b *testing.B) {
	for _, sh := range []struct {
		name string
		s    backend.Shape
		v    backend.Variants
	}{
		{"mistral/window1024", backend.Shape{B: 1, Hq: 8, Hkv: 2, Sq: 2048, Sk: 2048, D: 128}, backend.Variants{SlidingWindow: 1024}},
		{"gemma2/softcap50", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 2048, Sk: 2048, D: 256}, backend.Variants{Softcap: 50}},
		{"gemma2/softcap50-window1024", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 2048, Sk: 2048, D: 256}, backend.Variants{Softcap: 50, SlidingWindow: 1024}},
		{"gpt-oss/sinks", backend.Shape{B: 1, Hq: 64, Hkv: 8, Sq: 512, Sk: 512, D: 64}, backend.Variants{Sinks: make([]float32, 64)}},
		{"gpt-oss/sinks-window128", backend.Shape{B: 1, Hq: 64, Hkv: 8, Sq: 512, Sk: 512, D: 64}, backend.Variants{Sinks: make([]float32, 64), SlidingWindow: 128}},
	} {
		for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
			b.Run(sh.name+"/"+prec.String(), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				newProblem := func(s backend.Shape, m backend.Mask, v backend.Variants) *backend.Problem {
					p, _, _ := sdpatest.NewProblem(s, sdpatest.RandomInputs(rng, s, 1), float32(1/math.Sqrt(float64(s.D))), m, prec)
					p.Variants = v
					return p
				}
				calls := []*backend.Problem{newProblem(sh.s, backend.CausalLowerRight, sh.v), newProblem(sh.s, backend.CausalLowerRight, backend.Variants{})}
				if w := sh.v.SlidingWindow; w > 0 {
					s := sh.s
					s.Sk = w
					calls = append(calls, newProblem(s, backend.NoMask, backend.Variants{}))
				}
				be := cpu.New(1)
				perKey := make([][]float64, len(calls)) // seconds a visible flop
				var ratios []float64
				t := make([]float64, len(calls))
				for b.Loop() {
					for i := range calls {
						c := i
						if len(ratios)%2 == 1 {
							c = len(calls) - 1 - i
						}
						start := time.Now()
						if err := be.Attention(calls[c]); err != nil {
							b.Fatal(err)
						}
						t[c] = time.Since(start).Seconds() / visibleFLOPs(calls[c])
						perKey[c] = append(perKey[c], t[c])
					}
					ratios = append(ratios, t[0]/slices.Min(t[1:]))
				}
				b.ReportMetric(median(ratios), "variant/plain")
				for i, name := range []string{"variant", "causal", "plain-Wk"}[:len(calls)] {
					b.ReportMetric(1e-9/median(perKey[i]), name+"-GFLOP/s")
				}
			})
		}
	}
}

// BenchmarkPagedWindow: a decode step through the paged cache (B 8, Hq 64,
// Hkv 8, D 64) of sequences of 32768 tokens with a window of 128, against
// the same step over sequences of 128 tokens: a windowed decode reads the
// pages inside its window only, so the two should cost about the same (the
// target: at most 2x).
func BenchmarkPagedWindow(b *testing.B) {
	const B, hq, hkv, d = 8, 64, 8, 64
	for _, c := range []struct {
		name       string
		n, window  int
		withWindow bool
	}{{"seq128", 128, 0, false}, {"seq32768-window128", 32768, 128, true}} {
		b.Run(c.name, func(b *testing.B) {
			per := (c.n + 63) / 64
			cfg := backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: 64, Pages: B * per}
			kv, err := cpu.New(0).NewPagedKV(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer kv.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			p := &backend.PagedProblem{B: B, Hq: hq, Hkv: hkv, Sq: 1, D: d, Scale: 0.125, Mask: backend.CausalLowerRight,
				Q: make([]float32, B*hq*d), Out: make([]float32, B*hq*d), PagesPerSeq: per}
			if c.withWindow {
				p.SlidingWindow = c.window
			}
			for i := range p.Q {
				p.Q[i] = float32(rng.NormFloat64())
			}
			const chunk = 2048 // tokens a sequence per append
			x := make([]float32, chunk*hkv*d)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			for s := range B {
				p.SeqLens = append(p.SeqLens, int32(c.n))
				for pg := range per {
					p.BlockTable = append(p.BlockTable, int32(s*per+pg))
				}
				for t0 := 0; t0 < c.n; t0 += chunk {
					n := min(chunk, c.n-t0)
					a := &backend.PagedAppend{B: 1, N: n, K: x[:n*hkv*d], V: x[:n*hkv*d]}
					for t := t0; t < t0+n; t++ {
						a.Page, a.Slot = append(a.Page, int32(s*per+t/64)), append(a.Slot, int32(t%64))
					}
					if err := kv.Append(a); err != nil {
						b.Fatal(err)
					}
				}
			}
			for b.Loop() {
				if err := kv.Attention(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
