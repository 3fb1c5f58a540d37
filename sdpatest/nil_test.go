package sdpatest_test

import (
	"errors"
	"math"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestNilProblem: the exported tolerance and error functions take a nil
// problem without panicking, and give it nothing: zero tolerances, zero
// error bounds.
func TestNilProblem(t *testing.T) {
	for name, f := range map[string]func(*backend.Problem) sdpatest.Tolerance{
		"FP32Tolerance": sdpatest.FP32Tolerance, "F16PTolerance": sdpatest.F16PTolerance, "FP8PTolerance": sdpatest.FP8PTolerance,
		"FP8MMATolerance": sdpatest.FP8MMATolerance, "FP8MMALSETolerance": sdpatest.FP8MMALSETolerance, "LSETolerance": sdpatest.LSETolerance,
	} {
		if tol := f(nil); tol.Atol != 0 || tol.Rtol != 0 {
			t.Errorf("%s(nil) = %+v, want zero tolerances", name, tol)
		}
	}
	for name, f := range map[string]func(*backend.Problem) float64{
		"FP8MMAScoreError": sdpatest.FP8MMAScoreError, "FP8PVError": sdpatest.FP8PVError, "TanhApproxError": sdpatest.TanhApproxError,
	} {
		if e := f(nil); e != 0 {
			t.Errorf("%s(nil) = %g, want 0", name, e)
		}
	}
	if m, v := sdpatest.ScoreBound(nil); m != 0 || v != 0 {
		t.Errorf("ScoreBound(nil) = %g, %g, want 0, 0", m, v)
	}
	if r := sdpatest.FP8MMARMSTolerance(nil); r.RMS != 0 {
		t.Errorf("FP8MMARMSTolerance(nil) = %+v, want a zero bound", r)
	}
	if r := sdpatest.SpreadRMS(nil); r != 0 {
		t.Errorf("SpreadRMS(nil) = %g, want 0", r)
	}
}

// TestHelpersNeverPanic: the helpers take nil, negative and short
// arguments without panicking: a nil Guarded's Check is an error, a
// negative NewGuarded holds no elements, Compare counts what a short got
// lacks as beyond tolerance, and PagedSequence refuses a nil reader.
func TestHelpersNeverPanic(t *testing.T) {
	var g *sdpatest.Guarded
	if err := g.Check("x"); err == nil {
		t.Error("a nil Guarded's Check passed")
	}
	if n := len(sdpatest.NewGuarded(-1).Data()); n != 0 {
		t.Errorf("NewGuarded(-1) holds %d elements", n)
	}
	if st := sdpatest.Compare([]float32{1, 4, float32(math.NaN())}, []float64{1, 2, 0, math.Inf(1)}, sdpatest.Tolerance{Atol: 9}); st.RMS != math.Sqrt(2) || st.Finite != 2 {
		t.Errorf("Compare's RMS over a short got, NaN and Inf: %g over %d, want √2 over 2", st.RMS, st.Finite)
	}
	if st := sdpatest.Compare([]float32{}, []float64{}, sdpatest.Tolerance{}); st.RMS != 0 || st.Finite != 0 {
		t.Errorf("Compare's RMS of nothing: %g over %d", st.RMS, st.Finite)
	}
	st := sdpatest.Compare([]float32{1}, []float64{1, 2, math.NaN()}, sdpatest.Tolerance{Atol: 1})
	if st.Beyond != 2 || st.FirstBad != 1 {
		t.Errorf("Compare of a short got: %d beyond, the first %d; want 2, 1", st.Beyond, st.FirstBad)
	}
	p := &backend.PagedProblem{B: 1, Hq: 1, Hkv: 1, Sq: 1, D: 16, Scale: 1, SeqLens: []int32{1}, BlockTable: []int32{0}, PagesPerSeq: 1}
	if _, err := sdpatest.PagedSequence(nil, p, backend.PagedConfig{}, 0); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("PagedSequence with a nil reader: %v, want ErrInvalid", err)
	}
}
