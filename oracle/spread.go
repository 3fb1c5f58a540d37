package oracle

import (
	"math"

	"github.com/fp8attn/fp8attn/backend"
)

// Spread is what noise on the weights of attention does to its output, to
// first order, from the exact (float64) weights of each row: w_j, each
// key's share of the row's denominator (the sink's weight included there,
// so that a row's w_j sum to 1 less the sink's share), and o, the row's
// output.
//
// Var holds, for each output element (p's layout), Σ_j w_j²·(v_j − o)²:
// where each w_j is multiplied by 1 + δ_j, the δ_j independent with zero
// mean and variance σ², and the row is normalized by the noisy weights'
// sum (plus the sink's exact weight), the output moves by
// Σ_j w_j·δ_j·(v_j − o) over a denominator within a factor 1 + max|δ| of
// 1, so by a variance of σ²·Var. A row with no key holds 0; a row whose
// inputs hold NaN holds NaN.
type Spread struct {
	Var []float64
}

// WeightSpread returns p's Spread, with p's variants (a softcap on each
// score, the window's keys, the sink in the denominator), on the inputs
// Naive reads (dequantized for FP8E4M3). p's inputs must be as Validate
// wants them (WeightSpread reads them without checks, as Naive does); a
// nil p gives a zero Spread.
func WeightSpread(p *backend.Problem) Spread {
	if p == nil {
		return Spread{}
	}
	q, k, v := Inputs(p)
	D := p.D
	out := make([]float64, p.B*p.Hq*p.Sq*D)
	scale, c := float64(p.Scale), float64(p.Softcap)
	w := make([]float64, p.Sk)
	o := make([]float64, D)
	rows(p, q, k, v, func(qi, kh, vh []float64, lo, hi int, sink float64, r int) {
		if lo >= hi {
			return
		}
		m := scoreRow(qi, kh, lo, hi, scale, c, w)
		den := math.Exp(sink - m)
		for j := lo; j < hi; j++ {
			w[j] = math.Exp(w[j] - m)
			den += w[j]
		}
		clear(o)
		for j := lo; j < hi; j++ {
			w[j] /= den
			for d := 0; d < D; d++ {
				o[d] += w[j] * vh[j*D+d]
			}
		}
		vr := out[r*D : (r+1)*D]
		for j := lo; j < hi; j++ {
			for d := 0; d < D; d++ {
				e := vh[j*D+d] - o[d]
				vr[d] += w[j] * w[j] * e * e
			}
		}
	})
	return Spread{Var: inLayout(p, out)}
}
