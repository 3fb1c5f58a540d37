package oracle_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestWeightSpreadHandWorked: one row of two keys, D 1, scale 1: scores 0
// and ln 3 give weights 1/4 and 3/4 (with a sink of logit ln 4, 1/8 and
// 3/8 of a denominator of 8), values 1 and 5.
func TestWeightSpreadHandWorked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sinks []float32
		want  float64
	}{
		// o = 1/4 + 15/4 = 4: (1/4)²·9 + (3/4)²·1.
		{"no sink", nil, 9.0/16 + 9.0/16},
		// o = 1/8 + 15/8 = 2: (1/8)²·1 + (3/8)²·9.
		{"sink", []float32{float32(math.Log(4))}, 1.0/64 + 81.0/64},
	} {
		p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 2, D: 1}, Precision: backend.FP32, Scale: 1,
			Q: []float32{1}, K: []float32{0, float32(math.Log(3))}, V: []float32{1, 5}, Out: make([]float32, 1),
			Variants: backend.Variants{Sinks: tc.sinks}}
		got := oracle.WeightSpread(p).Var
		if len(got) != 1 || math.Abs(got[0]-tc.want) > 1e-6*tc.want {
			t.Errorf("%s: Var %v, want [%g]", tc.name, got, tc.want)
		}
	}
	if s := oracle.WeightSpread(nil); s.Var != nil {
		t.Errorf("nil problem: %v", s.Var)
	}
}

// TestWeightSpreadMonteCarlo: multiplying each weight by 1 + δ (δ uniform
// within ±2^-4, the rows normalized by the noisy sum and the sink) moves
// each output by a variance within 10% of (2^-8/3)·Var, the first-order
// prediction, over rows with a window, a softcap and a sink.
func TestWeightSpreadMonteCarlo(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 31))
	s := backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 3, Sk: 24, D: 4}
	in := sdpatest.RandomInputs(rng, s, 1.5)
	in.Sinks = []float32{0.5, -1}
	p, _, _ := sdpatest.NewProblem(s, in, 0.7, backend.CausalLowerRight, backend.FP32)
	p.Variants = backend.Variants{SlidingWindow: 20, Softcap: 3, Sinks: in.Sinks}
	want := oracle.WeightSpread(p).Var
	o, _ := oracle.Naive(p)
	q, k, v := oracle.Inputs(p)
	const a, trials = 1.0 / 16, 20000
	sigma2 := a * a / 3
	w := make([]float64, s.Sk)
	for h := 0; h < s.Hq; h++ {
		for i := 0; i < s.Sq; i++ {
			lo, hi := p.KeyRange(i)
			m := math.Inf(-1)
			for j := lo; j < hi; j++ {
				var dot float64
				for d := 0; d < s.D; d++ {
					dot += q[(h*s.Sq+i)*s.D+d] * k[j*s.D+d]
				}
				w[j] = 3 * math.Tanh(dot*0.7/3)
				m = max(m, w[j])
			}
			sink := math.Exp(float64(in.Sinks[h]) - m)
			var sq [4]float64
			for range trials {
				den := sink
				var num [4]float64
				for j := lo; j < hi; j++ {
					e := math.Exp(w[j]-m) * (1 + a*(2*rng.Float64()-1))
					den += e
					for d := range num {
						num[d] += e * v[j*s.D+d]
					}
				}
				for d := range num {
					x := num[d]/den - o[(h*s.Sq+i)*s.D+d]
					sq[d] += x * x
				}
			}
			for d := range sq {
				got, pred := sq[d]/trials, sigma2*want[(h*s.Sq+i)*s.D+d]
				if !(math.Abs(got-pred) <= 0.1*pred) {
					t.Errorf("head %d row %d column %d: noise variance %.4g, predicted %.4g", h, i, d, got, pred)
				}
			}
		}
	}
}
