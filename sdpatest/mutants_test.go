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
