// Package oracle computes attention in float64: the references every backend
// and every GPU kernel stage is checked against.
//
// Naive is the textbook two-pass definition (scores, row max, exponentials,
// normalisation), with the attention variants (sliding window, softcap,
// sinks) as package backend defines them. Online is the tiled online softmax of FlashAttention: one
// pass over key blocks with a running max and sum. The two share no code
// beyond reading the inputs, and the tests hold them to each other and to
// hand-worked cases. For FP8E4M3 problems both compute on the dequantized
// inputs (code value × scale), so they measure what a backend adds on top of
// the input quantization.
//
// The package also registers a backend named "reference" that runs Naive.
package oracle

import (
	"math"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/layout"
)

// Inputs returns float64 copies of p's Q, K and V in [B][H][S][D] order,
// whatever p's layout, dequantized (code value × scale) for FP8E4M3.
func Inputs(p *backend.Problem) (q, k, v []float64) {
	return canonical(p, p.Hq, p.Sq, p.Q, p.Q8, p.QScale),
		canonical(p, p.Hkv, p.Sk, p.K, p.K8, p.KScale),
		canonical(p, p.Hkv, p.Sk, p.V, p.V8, p.VScale)
}

// canonical copies one tensor of h heads and s rows to float64 [B][H][S][D].
func canonical(p *backend.Problem, h, s int, x []float32, x8 []fp8.E4M3, scales []float32) []float64 {
	d := p.D
	out := make([]float64, p.B*h*s*d)
	for b := 0; b < p.B; b++ {
		for hd := 0; hd < h; hd++ {
			for i := 0; i < s; i++ {
				src, dst := p.Layout.Offset(b, hd, i, h, s, d), ((b*h+hd)*s+i)*d
				if p.Precision == backend.FP32 {
					for c := 0; c < d; c++ {
						out[dst+c] = float64(x[src+c])
					}
					continue
				}
				sc := float64(scales[b*h+hd])
				for c := 0; c < d; c++ {
					out[dst+c] = float64(x8[src+c].Float32()) * sc
				}
			}
		}
	}
	return out
}

// inLayout returns out, computed in [B][Hq][Sq][D] order, in p's layout.
func inLayout(p *backend.Problem, out []float64) []float64 {
	if p.Layout == backend.BHSD {
		return out
	}
	return layout.Permute(out, p.B, p.Hq, p.Sq, p.D, p.Layout)
}

func widen(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// rows calls fn for every query row with the row's query vector, its head's
// keys and values, the keys lo..hi-1 it sees (mask and sliding window), its
// sink logit (-Inf for none), and where its output goes.
func rows(p *backend.Problem, q, k, v []float64, fn func(qi, kh, vh []float64, lo, hi int, sink float64, o int)) {
	s := p.Shape
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.Hq; h++ {
			kvh := b*s.Hkv + h/s.Group()
			kh := k[kvh*s.Sk*s.D : (kvh+1)*s.Sk*s.D]
			vh := v[kvh*s.Sk*s.D : (kvh+1)*s.Sk*s.D]
			for i := 0; i < s.Sq; i++ {
				o := (b*s.Hq+h)*s.Sq + i
				lo, hi := p.KeyRange(i)
				fn(q[o*s.D:(o+1)*s.D], kh, vh, lo, hi, p.Sink(h), o)
			}
		}
	}
}

// scoreRow writes the scores of query qi against keys lo..hi-1 of kh
// (scale·q·k, softcapped by c) into s[lo:hi] and returns their maximum,
// NaN if any is NaN. The two-pass forms (Naive, WeightSpread) take it.
func scoreRow(qi, kh []float64, lo, hi int, scale, c float64, s []float64) float64 {
	D := len(qi)
	m := math.Inf(-1)
	for j := lo; j < hi; j++ {
		var dot float64
		for d := 0; d < D; d++ {
			dot += qi[d] * kh[j*D+d]
		}
		s[j] = softcap(dot*scale, c)
		m = max(m, s[j]) // max propagates NaN
	}
	return m
}

// softcap returns c·tanh(s/c), or s for c = 0 (no softcap).
func softcap(s, c float64) float64 {
	if c == 0 {
		return s
	}
	return c * math.Tanh(s/c)
}

// Naive returns the output ([B][Hq][Sq][D] in p's layout) and natural
// log-sum-exp ([B][Hq][Sq]) by the two-pass definition, with p's variants:
// each score softcapped before the mask, only the keys of the row's window,
// and the sink's e^sink added to the denominator (not to the LSE, which is
// over the keys). A row with no visible key gets zeros and LSE -Inf; NaN in
// its inputs makes a row NaN. p's inputs must be as Validate wants them
// (Naive reads them without checks, as a backend's kernels do; Out may be
// nil); a nil p gives nil, nil.
func Naive(p *backend.Problem) (out, lse []float64) {
	if p == nil {
		return nil, nil
	}
	q, k, v := Inputs(p)
	D := p.D
	out = make([]float64, p.B*p.Hq*p.Sq*D)
	lse = make([]float64, p.B*p.Hq*p.Sq)
	scale, c := float64(p.Scale), float64(p.Softcap)
	scores := make([]float64, p.Sk)
	rows(p, q, k, v, func(qi, kh, vh []float64, lo, hi int, sink float64, o int) {
		if lo >= hi {
			lse[o] = math.Inf(-1)
			return
		}
		m := scoreRow(qi, kh, lo, hi, scale, c, scores)
		var l float64
		for j := lo; j < hi; j++ {
			scores[j] = math.Exp(scores[j] - m)
			l += scores[j]
		}
		den := l + math.Exp(sink-m)
		oi := out[o*D : (o+1)*D]
		for j := lo; j < hi; j++ {
			w := scores[j] / den
			for d := 0; d < D; d++ {
				oi[d] += w * vh[j*D+d]
			}
		}
		lse[o] = m + math.Log(l)
	})
	return inLayout(p, out), lse
}

// Online returns what Naive returns, computed by the online softmax over key
// blocks of blockK keys (aligned to key 0, the first and last clipped to the
// row's window): a running max m and sum l per row, the partial output
// rescaled by exp(m_old - m_new) whenever the max grows, and the sink joining
// l once, when the row is finished. p as for Naive; a blockK below 1 is
// taken as 1.
func Online(p *backend.Problem, blockK int) (out, lse []float64) {
	if p == nil {
		return nil, nil
	}
	blockK = max(blockK, 1)
	q, k, v := Inputs(p)
	D := p.D
	out = make([]float64, p.B*p.Hq*p.Sq*D)
	lse = make([]float64, p.B*p.Hq*p.Sq)
	scale, c := float64(p.Scale), float64(p.Softcap)
	s := make([]float64, blockK)
	acc := make([]float64, D)
	rows(p, q, k, v, func(qi, kh, vh []float64, lo, hi int, sink float64, o int) {
		m, l := math.Inf(-1), 0.0
		clear(acc)
		for b0 := lo / blockK * blockK; b0 < hi; b0 += blockK {
			j0, j1 := max(b0, lo), min(b0+blockK, hi)
			blockMax := math.Inf(-1)
			for j := j0; j < j1; j++ {
				var dot float64
				for d, x := range qi {
					dot += x * kh[j*D+d]
				}
				s[j-j0] = softcap(dot*scale, c)
				blockMax = max(blockMax, s[j-j0])
			}
			mNew := max(m, blockMax)
			alpha := 0.0
			if l != 0 || math.IsNaN(m) {
				alpha = math.Exp(m - mNew)
			}
			l *= alpha
			for d := range acc {
				acc[d] *= alpha
			}
			for j := j0; j < j1; j++ {
				e := math.Exp(s[j-j0] - mNew)
				l += e
				for d := range acc {
					acc[d] += e * vh[j*D+d]
				}
			}
			m = mNew
		}
		if lo >= hi {
			lse[o] = math.Inf(-1)
			return
		}
		oi := out[o*D : (o+1)*D]
		den := l + math.Exp(sink-m)
		for d := range acc {
			oi[d] = acc[d] / den
		}
		lse[o] = m + math.Log(l)
	})
	return inLayout(p, out), lse
}

// Reference is the backend that runs Naive in float64 and rounds the result
// to float32. It is slow, supports everything, and is registered as
// "reference" with the lowest priority.
type Reference struct{}

// Name returns "reference".
func (Reference) Name() string { return "reference" }

// Supports accepts every problem (Attention validates it).
func (Reference) Supports(*backend.Problem) error { return nil }

// Attention computes p.Out and p.LSE with Naive, once p is valid.
func (Reference) Attention(p *backend.Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	out, lse := Naive(p)
	for i, x := range out {
		p.Out[i] = float32(x)
	}
	for i := range p.LSE {
		p.LSE[i] = float32(lse[i])
	}
	return nil
}

func init() { backend.MustRegister(Reference{}, -100) }
