package sdpatest_test

import (
	"testing"

	gomutant "github.com/fp8attn/fp8attn/internal/mutant"
)

// TestNilCatchesMutants: a tolerance or error function without its nil
// guard fails TestNilProblem (FP8ATTN_MUTANTS=1).
func TestNilCatchesMutants(t *testing.T) {
	gomutant.Run(t, []gomutant.Mutant{
		{Name: "TanhApproxError reads a nil problem", File: "sdpatest/sdpatest.go", Pkg: "./sdpatest",
			Old:   "func TanhApproxError(p *backend.Problem) float64 {\n\tif p == nil {\n\t\treturn 0\n\t}\n",
			New:   "func TanhApproxError(p *backend.Problem) float64 {\n",
			Tests: []string{"TestNilProblem"}},
		{Name: "FP8PTolerance reads a nil problem", File: "sdpatest/sdpatest.go", Pkg: "./sdpatest",
			Old:   "func FP8PTolerance(p *backend.Problem) Tolerance {\n\tif p == nil {\n\t\treturn noProblem\n\t}\n",
			New:   "func FP8PTolerance(p *backend.Problem) Tolerance {\n",
			Tests: []string{"TestNilProblem"}},
	})
}

// TestRMSTierCatchesMutants: the RMS tier without its check, with its
// bound's parts mis-scaled, or Compare's RMS over every element, fails TestRMSTierHoldsRescale,
// TestRMSTolerance or TestHelpersNeverPanic (FP8ATTN_MUTANTS=1).
func TestRMSTierCatchesMutants(t *testing.T) {
	tests := []string{"TestRMSTierHoldsRescale", "TestRMSTolerance", "TestHelpersNeverPanic", "TestNilProblem"}
	gomutant.Run(t, []gomutant.Mutant{
		{Name: "the RMS tier never checked", File: "sdpatest/rms.go", Pkg: "./sdpatest",
			Old: "if st.RMS > rt.RMS {", New: "if st.RMS > rt.RMS && false {", Tests: tests},
		{Name: "the spread's variance as its RMS", File: "sdpatest/rms.go", Pkg: "./sdpatest",
			Old: "return math.Sqrt(sum / float64(n))\n}\n\n// The RMS tier", New: "return sum / float64(n)\n}\n\n// The RMS tier", Tests: tests},
		{Name: "the score errors' share taken whole", File: "sdpatest/rms.go", Pkg: "./sdpatest",
			Old: "rmsScoreShare = 0.1", New: "rmsScoreShare = 1", Tests: tests},
		{Name: "Compare's RMS over every element", File: "sdpatest/sdpatest.go", Pkg: "./sdpatest",
			Old: "st.RMS = math.Sqrt(num / float64(st.Finite))", New: "st.RMS = math.Sqrt(num / float64(st.N))", Tests: tests},
	})
}
