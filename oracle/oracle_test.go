package oracle_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// matrixForm computes one head's attention with gonum: S = scale·Q·Kᵀ,
// softcapped (c > 0), entries outside each row's keys lo..hi-1 -Inf, and a
// sink as one more column of S (a key whose value is zero), row softmax,
// O = P·V. A third formulation, written as matrices rather than loops.
func matrixForm(q, k, v *mat.Dense, scale, c, sink float64, keys func(i int) (lo, hi int)) *mat.Dense {
	sq, _ := q.Dims()
	sk, d := k.Dims()
	var s mat.Dense
	s.Mul(q, k.T())
	s.Scale(scale, &s)
	if c > 0 {
		s.Apply(func(_, _ int, x float64) float64 { return c * math.Tanh(x/c) }, &s)
	}
	ext := mat.NewDense(sq, sk+1, nil) // the sink's column last
	for i := 0; i < sq; i++ {
		row := ext.RawRowView(i)
		copy(row, s.RawRowView(i))
		lo, hi := keys(i)
		for j := 0; j < sk; j++ {
			if j < lo || j >= hi {
				row[j] = math.Inf(-1)
			}
		}
		row[sk] = sink
		if lo >= hi {
			for j := range row {
				row[j] = 0
			}
			continue
		}
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		var l float64
		for j := range row {
			row[j] = math.Exp(row[j] - m)
			l += row[j]
		}
		for j := range row {
			row[j] /= l
		}
	}
	vz := mat.NewDense(sk+1, d, nil) // V with the sink's zero row
	vz.Slice(0, sk, 0, d).(*mat.Dense).Copy(v)
	o := mat.NewDense(sq, d, nil)
	o.Mul(ext, vz)
	return o
}

func TestNaiveOnlineMatrixAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 9))
	for _, c := range sdpatest.Cases() {
		s := c.Shape
		in := sdpatest.RandomInputs(rng, s, c.Sigma)
		p, _, _ := sdpatest.NewProblem(s, in, float32(1/math.Sqrt(float64(s.D))), c.Mask, backend.FP32)
		p.SlidingWindow, p.Softcap = c.Window, c.Softcap
		if c.Sinks {
			p.Sinks = sdpatest.RandomSinks(rng, s)
		}
		naive, nl := oracle.Naive(p)
		for _, bk := range []int{1, 7, 64} {
			online, ol := oracle.Online(p, bk)
			tol := sdpatest.Tolerance{Atol: 1e-12 * (1 + c.Sigma*c.Sigma), Rtol: 1e-10}
			if st := sdpatest.Compare(online, naive, tol); st.Beyond > 0 {
				t.Fatalf("%s bk=%d: online differs from naive at %d (max %g)", c.Name, bk, st.Beyond, st.MaxErr)
			}
			if st := sdpatest.Compare(ol, nl, tol); st.Beyond > 0 {
				t.Fatalf("%s bk=%d: online LSE differs", c.Name, bk)
			}
		}
		q, k, v := oracle.Inputs(p)
		for b := 0; b < s.B; b++ {
			for h := 0; h < s.Hq; h++ {
				kvh := b*s.Hkv + h/s.Group()
				qo := (b*s.Hq + h) * s.Sq * s.D
				ko := kvh * s.Sk * s.D
				o := matrixForm(mat.NewDense(s.Sq, s.D, q[qo:qo+s.Sq*s.D]), mat.NewDense(s.Sk, s.D, k[ko:ko+s.Sk*s.D]),
					mat.NewDense(s.Sk, s.D, v[ko:ko+s.Sk*s.D]), float64(p.Scale), float64(p.Softcap), p.Sink(h), p.KeyRange)
				tol := sdpatest.Tolerance{Atol: 1e-12 * (1 + c.Sigma*c.Sigma), Rtol: 1e-10}
				if st := sdpatest.Compare(o.RawMatrix().Data, naive[qo:qo+s.Sq*s.D], tol); st.Beyond > 0 {
					t.Fatalf("%s head (%d,%d): gonum form differs at %d", c.Name, b, h, st.Beyond)
				}
			}
		}
	}
}

// TestHandWorked pins cases worked out on paper.
func TestHandWorked(t *testing.T) {
	// One query, two keys, D=1, scale 1: scores 1·2=2 and 1·0=0.
	// weights e²/(e²+1), 1/(e²+1); values 10 and 20.
	e2 := math.Exp(2)
	p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 2, D: 1}, Scale: 1,
		Q: []float32{1}, K: []float32{2, 0}, V: []float32{10, 20}}
	wantOut := (10*e2 + 20) / (e2 + 1)
	wantLSE := math.Log(e2 + 1)
	for name, f := range map[string]func(*backend.Problem) ([]float64, []float64){
		"naive": oracle.Naive, "online": func(p *backend.Problem) ([]float64, []float64) { return oracle.Online(p, 1) },
	} {
		out, lse := f(p)
		if math.Abs(out[0]-wantOut) > 1e-12 || math.Abs(lse[0]-wantLSE) > 1e-12 {
			t.Errorf("%s: got %v %v, want %v %v", name, out[0], lse[0], wantOut, wantLSE)
		}
	}
	// Causal upper-left, Sq=Sk=2, equal scores: row 0 sees value 10 only;
	// row 1 averages 10 and 20. LSE: 0 and log 2 (scores 0).
	p = &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 2, Sk: 2, D: 1}, Scale: 1, Mask: backend.CausalUpperLeft,
		Q: []float32{0, 0}, K: []float32{1, 1}, V: []float32{10, 20}}
	out, lse := oracle.Naive(p)
	if out[0] != 10 || out[1] != 15 || lse[0] != 0 || math.Abs(lse[1]-math.Ln2) > 1e-15 {
		t.Errorf("causal: got %v %v", out, lse)
	}
	// The variants on the first case (scores 2 and 0, values 10 and 20): a
	// sink of 1 adds e to the denominator only; a softcap of 1 turns the
	// scores into tanh 2 and 0.
	e := math.E
	t2 := math.Exp(math.Tanh(2))
	for _, c := range []struct {
		name     string
		v        backend.Variants
		out, lse float64
	}{
		{"sink", backend.Variants{Sinks: []float32{1}}, (10*e2 + 20) / (e2 + 1 + e), math.Log(e2 + 1)},
		{"softcap", backend.Variants{Softcap: 1}, (10*t2 + 20) / (t2 + 1), math.Log(t2 + 1)},
		{"both", backend.Variants{Softcap: 1, Sinks: []float32{1}}, (10*t2 + 20) / (t2 + 1 + e), math.Log(t2 + 1)},
	} {
		p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 2, D: 1}, Scale: 1, Variants: c.v,
			Q: []float32{1}, K: []float32{2, 0}, V: []float32{10, 20}}
		for name, f := range map[string]func(*backend.Problem) ([]float64, []float64){
			"naive": oracle.Naive, "online": func(p *backend.Problem) ([]float64, []float64) { return oracle.Online(p, 1) },
		} {
			out, lse := f(p)
			if math.Abs(out[0]-c.out) > 1e-12 || math.Abs(lse[0]-c.lse) > 1e-12 {
				t.Errorf("%s, %s: got %v %v, want %v %v", c.name, name, out[0], lse[0], c.out, c.lse)
			}
		}
	}
	// A window of 2 under the upper-left mask, equal scores: rows see
	// values {10}, {10, 20}, {20, 30}.
	p = &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 3, Sk: 3, D: 1}, Scale: 1, Mask: backend.CausalUpperLeft,
		Variants: backend.Variants{SlidingWindow: 2}, Q: []float32{0, 0, 0}, K: []float32{1, 1, 1}, V: []float32{10, 20, 30}}
	for _, bk := range []int{1, 2, 4} {
		out, _ := oracle.Online(p, bk)
		if want := []float64{10, 15, 25}; !slices.Equal(out, want) {
			t.Errorf("window, online blocks of %d: got %v, want %v", bk, out, want)
		}
	}
	if out, _ := oracle.Naive(p); !slices.Equal(out, []float64{10, 15, 25}) {
		t.Errorf("window, naive: got %v", out)
	}
	// Lower-right with Sq=3 > Sk=1: rows 0 and 1 see nothing.
	p = &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 3, Sk: 1, D: 1}, Scale: 1, Mask: backend.CausalLowerRight,
		Q: []float32{1, 1, 1}, K: []float32{1}, V: []float32{7}}
	out, lse = oracle.Online(p, 4)
	if out[0] != 0 || out[1] != 0 || out[2] != 7 || !math.IsInf(lse[0], -1) || lse[2] != 1 {
		t.Errorf("lower-right: got %v %v", out, lse)
	}
}

// TestReferenceRefusesInvalid: Reference.Attention reports invalid
// problems (nil, short buffers, zero heads) as errors wrapping ErrInvalid,
// and Naive and Online take a nil problem and a block of 0 or fewer keys
// without panicking.
func TestReferenceRefusesInvalid(t *testing.T) {
	valid := func() *backend.Problem {
		s := backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 3, Sk: 5, D: 4}
		in := sdpatest.RandomInputs(rand.New(rand.NewPCG(sdpatest.Seed(), 3)), s, 1)
		p, _, _ := sdpatest.NewProblem(s, in, 0.5, backend.NoMask, backend.FP32)
		return p
	}
	for _, c := range []struct {
		name   string
		mangle func(p *backend.Problem) *backend.Problem
	}{
		{"nil", func(*backend.Problem) *backend.Problem { return nil }},
		{"short Out", func(p *backend.Problem) *backend.Problem { p.Out = p.Out[:3]; return p }},
		{"short Q", func(p *backend.Problem) *backend.Problem { p.Q = p.Q[:3]; return p }},
		{"Hkv 0", func(p *backend.Problem) *backend.Problem { p.Hkv = 0; return p }},
	} {
		if err := (oracle.Reference{}).Attention(c.mangle(valid())); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	if out, lse := oracle.Naive(nil); out != nil || lse != nil {
		t.Error("Naive(nil) returned results")
	}
	if out, lse := oracle.Online(nil, 4); out != nil || lse != nil {
		t.Error("Online(nil, 4) returned results")
	}
	p := valid()
	want, _ := oracle.Naive(p)
	for _, blockK := range []int{0, -1} {
		got, _ := oracle.Online(p, blockK)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
				t.Fatalf("Online(p, %d): output %d is %g, Naive's %g", blockK, i, got[i], want[i])
			}
		}
	}
}
