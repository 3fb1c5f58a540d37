package sdpatest_test

import (
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
}
