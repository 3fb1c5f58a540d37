package cpu_test

import (
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestHugeScoresCatchMutants: a base2 kernel set that keeps its fused
// steps where the scaled scores grow huge fails TestHugeScores
// (FP8ATTN_MUTANTS=1). The base2 sets are the AVX-512 ones: on a CPU
// without them no block takes the check, and the mutants are skipped.
func TestHugeScoresCatchMutants(t *testing.T) {
	const file, pkg = "backend/cpu/attend.go", "./backend/cpu"
	tests := []string{"TestHugeScores"}
	noBase2 := ""
	if !slices.Contains(cpu.ISAs(), "avx512") {
		noBase2 = "no base2 kernel set on this CPU"
	}
	mutant.Run(t, []mutant.Mutant{
		{Name: "no block handed to the natural kernels", File: file, Pkg: pkg, Tests: tests, Skip: noBase2,
			Old: "if sees(r) && abs32(m[r]) >= hugeBase2 {", New: "if sees(r) && abs32(m[r]) >= hugeBase2 && false {"},
		{Name: "the bound at 2^32", File: file, Pkg: pkg, Tests: tests, Skip: noBase2,
			Old: "const hugeBase2 = 1 << 24", New: "const hugeBase2 = 1 << 32"},
	})
}
