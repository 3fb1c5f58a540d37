package sdpatest_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// flooredRescale is an online softmax over tiles of 64 keys whose rescale
// factor exp(m_old - m_new) never falls below 2^-4: a row's earlier tiles
// keep too much weight wherever its maximum grows by more than 4·ln 2
// from one tile to the next. Scores of unit variance rarely grow so, so
// only inputs whose scores rise along the keys show it. It computes plain
// FP32 problems in BHSD and hands the rest to the reference.
func flooredRescale(p *backend.Problem) error {
	if p.Precision != backend.FP32 || p.Layout != backend.BHSD || p.SlidingWindow != 0 || p.Softcap != 0 || p.Sinks != nil {
		return oracle.Reference{}.Attention(p)
	}
	const tile = 64
	floor := math.Exp2(-4)
	w := make([]float64, p.Sk)
	o := make([]float64, p.D)
	for bh := 0; bh < p.B*p.Hq; bh++ {
		b, h := bh/p.Hq, bh%p.Hq
		kv := h / p.Group()
		for i := 0; i < p.Sq; i++ {
			q := p.Q[p.Layout.Offset(b, h, i, p.Hq, p.Sq, p.D):][:p.D]
			lo, hi := p.KeyRange(i)
			m, l := math.Inf(-1), 0.0
			clear(o)
			for t0 := lo; t0 < hi; t0 += tile {
				t1 := min(t0+tile, hi)
				mt := math.Inf(-1)
				for j := t0; j < t1; j++ {
					k := p.K[p.Layout.Offset(b, kv, j, p.Hkv, p.Sk, p.D):][:p.D]
					s := 0.0
					for d := range k {
						s += float64(q[d]) * float64(k[d])
					}
					w[j] = s * float64(p.Scale)
					mt = max(mt, w[j])
				}
				mNew := max(m, mt)
				alpha := max(math.Exp(m-mNew), floor)
				l *= alpha
				for d := range o {
					o[d] *= alpha
				}
				for j := t0; j < t1; j++ {
					e := math.Exp(w[j] - mNew)
					l += e
					v := p.V[p.Layout.Offset(b, kv, j, p.Hkv, p.Sk, p.D):][:p.D]
					for d := range o {
						o[d] += e * float64(v[d])
					}
				}
				m = mNew
			}
			out := p.Out[p.Layout.Offset(b, h, i, p.Hq, p.Sq, p.D):][:p.D]
			for d := range out {
				out[d] = 0
				if l > 0 {
					out[d] = float32(o[d] / l)
				}
			}
			if p.LSE != nil {
				p.LSE[bh*p.Sq+i] = float32(m + math.Log(l))
			}
		}
	}
	return nil
}

// TestRisingKeysCatchFlooredRescale: the rising-keys cases fail a backend
// whose rescale factor is floored (flooredRescale), and pass the
// reference.
func TestRisingKeysCatchFlooredRescale(t *testing.T) {
	seed := sdpatest.Seed()
	broken := mutant{"floored-rescale", flooredRescale}
	var rising, other []string
	for _, err := range sdpatest.Failures(sdpatest.Config{Backend: broken, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance},
		rand.New(rand.NewPCG(seed, 6))) {
		if strings.HasPrefix(err.Error(), "rising-keys/") {
			rising = append(rising, err.Error())
		} else {
			other = append(other, err.Error())
		}
	}
	if len(rising) == 0 {
		t.Errorf("no rising-keys case fails a floored rescale (seed %d)", seed)
	}
	t.Logf("seed %d: %d rising-keys failures, e.g. %v; %d other failures %v", seed, len(rising), rising[:min(1, len(rising))], len(other), other)
	for _, err := range sdpatest.Failures(sdpatest.Config{Backend: oracle.Reference{}, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance},
		rand.New(rand.NewPCG(seed, 7))) {
		if strings.HasPrefix(err.Error(), "rising-keys/") {
			t.Errorf("the reference fails %v", err)
		}
	}
}

// TestRampKeys: key j of each head scales by 1 + ramp·j/Sk; shapes without
// keys or head dims leave the slice as it is.
func TestRampKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		s    backend.Shape
		k    []float32
		want []float32
	}{
		{"two heads", backend.Shape{B: 1, Hkv: 2, Sk: 2, D: 2}, []float32{1, 1, 1, 1, 1, 1, 1, 1}, []float32{1, 1, 5, 5, 1, 1, 5, 5}},
		{"no head dims", backend.Shape{B: 1, Hkv: 1, Sk: 2, D: 0}, []float32{1, 2}, []float32{1, 2}},
		{"no keys", backend.Shape{B: 1, Hkv: 1, Sk: 0, D: 2}, []float32{1, 2}, []float32{1, 2}},
	} {
		sdpatest.RampKeys(c.k, c.s, 8)
		for i := range c.k {
			if c.k[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, c.k, c.want)
				break
			}
		}
	}
}
