package sdpatest_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// e4m3Weights computes FP8E4M3 problems as the FP8 tensor-core kernels
// round their weights, in float64 otherwise: an online softmax over tiles
// of 128 keys from key 0, each tile's weights P·2^8 = 256·exp(s - m)
// against the running maximum m rounded to E4M3 (satfinite), O and the
// rounded weights' sum rescaled by max(exp(m_old - m_new), floor) and the
// row divided by that sum plus the sink's weight; LSE from the unrounded
// sum. floor 0 is the kernels' arithmetic (less their truncations);
// above it, the rescale floored. Other precisions go to the reference.
func e4m3Weights(floor float64) func(p *backend.Problem) error {
	return func(p *backend.Problem) error {
		if p.Precision != backend.FP8E4M3 {
			return oracle.Reference{}.Attention(p)
		}
		const tile = 128
		s := p.Shape
		q, k, v := oracle.Inputs(p)
		scale, c := float64(p.Scale), float64(p.Softcap)
		w := make([]float64, s.Sk)
		o := make([]float64, s.D)
		for b := 0; b < s.B; b++ {
			for h := 0; h < s.Hq; h++ {
				kv := b*s.Hkv + h/s.Group()
				for i := 0; i < s.Sq; i++ {
					qi := q[((b*s.Hq+h)*s.Sq+i)*s.D:][:s.D]
					lo, hi := p.KeyRange(i)
					m, l, rounded := math.Inf(-1), 0.0, 0.0
					clear(o)
					for t0 := lo / tile * tile; t0 < hi; t0 += tile {
						j0, j1 := max(t0, lo), min(t0+tile, hi)
						mt := math.Inf(-1)
						for j := j0; j < j1; j++ {
							var dot float64
							for d, x := range qi {
								dot += x * k[(kv*s.Sk+j)*s.D+d]
							}
							w[j] = dot * scale
							if c != 0 {
								w[j] = c * math.Tanh(w[j]/c)
							}
							mt = max(mt, w[j])
						}
						mNew := max(m, mt)
						alpha := max(math.Exp(m-mNew), floor)
						l, rounded = l*alpha, rounded*alpha
						for d := range o {
							o[d] *= alpha
						}
						for j := j0; j < j1; j++ {
							e := math.Exp(w[j] - mNew)
							l += e
							r := float64(fp8.ToE4M3(float32(256*e), fp8.SatFinite).Float32())
							rounded += r
							for d := range o {
								o[d] += r * v[(kv*s.Sk+j)*s.D+d]
							}
						}
						m = mNew
					}
					out := p.Out[p.Layout.Offset(b, h, i, s.Hq, s.Sq, s.D):][:s.D]
					den := rounded + 256*math.Exp(p.Sink(h)-m)
					for d := range out {
						out[d] = 0
						if lo < hi {
							out[d] = float32(o[d] / den)
						}
					}
					if p.LSE != nil {
						lse := math.Inf(-1)
						if lo < hi {
							lse = m + math.Log(l)
						}
						p.LSE[(b*s.Hq+h)*s.Sq+i] = float32(lse)
					}
				}
			}
		}
		return nil
	}
}

// TestRMSTierHoldsRescale: a backend with the FP8 kernels' rounding of the
// weights passes the conformance table with FP8MMARMSTolerance, and the
// same with its rescale floored at 2^-4 fails it on rising keys, which
// the worst-case tier alone lets through.
func TestRMSTierHoldsRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance table three times over a float64 model (about 15 s; minutes under the race detector)")
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	cfg := func(run func(*backend.Problem) error, name string, rms bool) sdpatest.Config {
		c := sdpatest.Config{Backend: mutant{name, run}, Precision: backend.FP8E4M3, Tol: sdpatest.FP8MMATolerance,
			LSETol: sdpatest.FP8MMALSETolerance}
		if rms {
			c.RMSTol = sdpatest.FP8MMARMSTolerance
		}
		return c
	}
	for _, err := range sdpatest.Failures(cfg(e4m3Weights(0), "e4m3-weights", true), rand.New(rand.NewPCG(seed, 11))) {
		t.Errorf("the kernels' rounding of the weights fails: %v", err)
	}
	floored := e4m3Weights(math.Exp2(-4))
	var rms []string
	for _, err := range sdpatest.Failures(cfg(floored, "floored-rescale", true), rand.New(rand.NewPCG(seed, 12))) {
		if strings.Contains(err.Error(), "RMS error") {
			rms = append(rms, err.Error())
		}
	}
	if len(rms) == 0 {
		t.Errorf("no case's RMS tier fails a floored rescale")
	}
	worst := sdpatest.Failures(cfg(floored, "floored-rescale", false), rand.New(rand.NewPCG(seed, 12)))
	t.Logf("floored rescale: %d RMS failures, e.g. %v; the worst-case tier alone: %d failures", len(rms), rms[:min(1, len(rms))], len(worst))
}

// TestRMSTolerance: the tier is what its documentation states, on a
// problem of rising keys at FP8E4M3: 3·SpreadRMS·√(2^-8/3 + (e/10)²) +
// 16·2^-13·max|v|, e the score bound with the softcap's; and SpreadRMS
// of one row of two keys (weights 1/4 and 3/4, values 1 and 5) is
// √(9/8) (oracle.WeightSpread's hand-worked row).
func TestRMSTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 13))
	s := backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 20, Sk: 300, D: 64}
	in := sdpatest.RandomInputs(rng, s, 1)
	sdpatest.RampKeys(in.K, s, 8)
	p, _, _ := sdpatest.NewProblem(s, in, 0.125, backend.NoMask, backend.FP8E4M3)
	p.Variants = backend.Variants{Softcap: 20}
	_, vmax := sdpatest.ScoreBound(p)
	e := 0.1 * (sdpatest.FP8MMAScoreError(p) + sdpatest.TanhApproxError(p))
	want := 3*sdpatest.SpreadRMS(p)*math.Sqrt(1.0/768+e*e) + 16*vmax/8192
	if got := sdpatest.FP8MMARMSTolerance(p).RMS; math.Abs(got-want) > 1e-12*want || !(want > 0) {
		t.Errorf("FP8MMARMSTolerance %g, want %g", got, want)
	}
	two := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 2, D: 1}, Precision: backend.FP32, Scale: 1,
		Q: []float32{1}, K: []float32{0, float32(math.Log(3))}, V: []float32{1, 5}, Out: make([]float32, 1)}
	if got := sdpatest.SpreadRMS(two); math.Abs(got-math.Sqrt(9.0/8)) > 1e-6 {
		t.Errorf("SpreadRMS of the two-key row %g, want √(9/8)", got)
	}
}

// TestRMSToleranceFor: the backends held to FP8MMATolerance (the FP8
// tensor-core kernels, and "cuda", which runs one) have the RMS tier
// beside it, and the others none.
func TestRMSToleranceFor(t *testing.T) {
	s := backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 4, Sk: 9, D: 16}
	p, _, _ := sdpatest.NewProblem(s, sdpatest.RandomInputs(rand.New(rand.NewPCG(sdpatest.Seed(), 14)), s, 1), 0.25, backend.NoMask, backend.FP8E4M3)
	for _, c := range []struct {
		name string
		rms  bool
	}{{"cuda", true}, {"cuda/sm90", true}, {"cuda/sm89", true}, {"cuda/sm80", false}, {"cuda/stage5", false}, {"cpu", false}, {"", false}} {
		rt := sdpatest.RMSToleranceFor(c.name)
		if (rt != nil) != c.rms {
			t.Errorf("%q: RMS tier %v, want %v", c.name, rt != nil, c.rms)
			continue
		}
		if rt != nil && rt(p) != sdpatest.FP8MMARMSTolerance(p) {
			t.Errorf("%q: %+v, want FP8MMARMSTolerance's %+v", c.name, rt(p), sdpatest.FP8MMARMSTolerance(p))
		}
		if worst := sdpatest.ToleranceFor(c.name)(p); (worst == sdpatest.FP8MMATolerance(p)) != c.rms {
			t.Errorf("%q: worst-case tier %q: an RMS tier belongs with FP8MMATolerance alone", c.name, worst.Why)
		}
	}
}
