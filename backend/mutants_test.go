package backend

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestChecksCatchMutants: each nil and size check, broken on purpose,
// fails the test that proves it (FP8ATTN_MUTANTS=1).
func TestChecksCatchMutants(t *testing.T) {
	const pkg = "./backend"
	mutant.Run(t, []mutant.Mutant{
		{Name: "nil Problem", File: "backend/backend.go", Pkg: pkg,
			Old: "if p == nil {\n\t\treturn fmt.Errorf(\"%w: a nil problem\"", New: "if false {\n\t\treturn fmt.Errorf(\"%w: a nil problem\"",
			Tests: []string{"TestExportedNeverPanic"}},
		{Name: "nil PagedAppend", File: "backend/paged.go", Pkg: pkg,
			Old: "if a == nil {", New: "if false {",
			Tests: []string{"TestExportedNeverPanic"}},
		{Name: "Register of a nil pointer", File: "backend/registry.go", Pkg: pkg,
			Old: "b == nil || isNilPointer(b) ||", New: "b == nil ||",
			Tests: []string{"TestExportedNeverPanic"}},
		{Name: "Group divides by zero", File: "backend/backend.go", Pkg: pkg,
			Old: "if s.Hkv <= 0 {\n\t\treturn 0", New: "if false {\n\t\treturn 0",
			Tests: []string{"TestExportedNeverPanic"}},
		{Name: "a NaN score factor passes", File: "backend/backend.go", Pkg: pkg,
			Old: "!(f <= limit)", New: "f > limit",
			Tests: []string{"TestScoreFactorNaNFails"}},
		{Name: "a window without a causal mask", File: "backend/variants.go", Pkg: pkg,
			Old: "v.SlidingWindow > 0 && m != CausalUpperLeft", New: "v.SlidingWindow > 0 && m == CausalUpperLeft",
			Tests: []string{"TestVariantsValidate"}},
		{Name: "a NaN softcap passes", File: "backend/variants.go", Pkg: pkg,
			Old: "!(c >= 0) || math.IsInf(c, 0)", New: "c < 0 || math.IsInf(c, 0)",
			Tests: []string{"TestVariantsValidate"}},
		{Name: "sinks of any length", File: "backend/variants.go", Pkg: pkg,
			Old: "if len(v.Sinks) != hq {", New: "if len(v.Sinks) > hq {",
			Tests: []string{"TestVariantsValidate"}},
		{Name: "varlen offsets may decrease", File: "backend/paged.go", Pkg: "./backend/cpu",
			Old: "\t\tif n < 0 {\n", New: "\t\tif false {\n",
			Tests: []string{"TestPagedValidate"}},
		{Name: "a varlen batch's Sq any count", File: "backend/paged.go", Pkg: "./backend/cpu",
			Old: "if most != p.Sq {", New: "if most > p.Sq {",
			Tests: []string{"TestPagedValidate"}},
		{Name: "varlen queries aligned by the batch's Sq", File: "backend/paged.go", Pkg: "./backend/cpu",
			Old: "return max(0, min(n, n-p.Queries(b)+i+1))", New: "return max(0, min(n, n-p.Sq+i+1))",
			Tests: []string{"TestPagedAttention"}},
		{Name: "a varlen sequence's rows a head taken as Sq", File: "backend/paged.go", Pkg: "./backend/cpu",
			Old: "return 0, int(p.QStarts[b]), p.Rows(), true", New: "return 0, int(p.QStarts[b]), p.Sq, true",
			Tests: []string{"TestPagedAttention"}},
		{Name: "Rows of a nil problem", File: "backend/paged.go", Pkg: pkg,
			Old: "\tcase p == nil:\n\t\treturn 0\n\tcase p.QStarts != nil:\n\t\tif len(p.QStarts) == 0 {", New: "\tcase false:\n\t\treturn 0\n\tcase p.QStarts != nil:\n\t\tif len(p.QStarts) == 0 {",
			Tests: []string{"TestExportedNeverPanic"}},
		{Name: "QOffset past the batch", File: "backend/paged.go", Pkg: pkg,
			Old: "case p == nil || b < 0 || b >= p.B:\n\t\treturn 0, 0, 0, false", New: "case p == nil || b < 0:\n\t\treturn 0, 0, 0, false",
			Tests: []string{"TestExportedNeverPanic"}},
		{Name: "a window one key too wide", File: "backend/variants.go", Pkg: pkg,
			Old: "lo = max(0, pos-v.SlidingWindow+1)", New: "lo = max(0, pos-v.SlidingWindow)",
			Tests: []string{"TestKeyRange"}},
		{Name: "scales on read without QuantizeOnRead", File: "backend/backend.go", Pkg: pkg,
			Old: "if p.ScalesOnRead && !p.QuantizeOnRead {", New: "if false {",
			Tests: []string{"TestScalesOnReadValidate"}},
		{Name: "scales on read still asked for", File: "backend/backend.go", Pkg: pkg,
			Old: "if p.ScalesOnRead {\n\t\t\t\twant = 0", New: "if false {\n\t\t\t\twant = 0",
			Tests: []string{"TestScalesOnReadValidate"}},
		{Name: "FLOPs' closed form off by one", File: "backend/backend.go", Pkg: pkg,
			Old: "keys += n * sk", New: "keys += (n - 1) * sk",
			Tests: []string{"TestFLOPsClosedForm"}},
	})
}
