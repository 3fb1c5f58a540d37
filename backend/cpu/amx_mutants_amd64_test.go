//go:build !purego

package cpu

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestAMXCatchesMutants: the exact FP8 form on AMX tiles, broken on
// purpose, fails the AMX tests and the conformance suite (FP8ATTN_MUTANTS=1;
// skipped on a CPU without AMX-BF16).
func TestAMXCatchesMutants(t *testing.T) {
	skip := ""
	if !hasAMX() {
		skip = "no AMX tiles on this CPU"
	}
	mutant.Run(t, []mutant.Mutant{
		{Name: "the exact form's P·V without the weights' m part", File: "backend/cpu/amx_amd64.s", Pkg: "./backend/cpu",
			Old:   "#define STEPS64_PV3 STEP64(2, 0, 0); STEP64(2, 0, 1); STEP64(1, 0, 0); STEP64(1, 0, 1); STEPS64_HH\n",
			New:   "#define STEPS64_PV3 STEP64(2, 0, 0); STEP64(2, 0, 1); STEPS64_HH\n",
			Tests: []string{"TestAMXSplit", "TestAMXUpdate", "TestAMXSoftmax4", "TestAMXGemm6", "TestAMXAttend64", "TestConformance"},
			Skip:  skip},
	})
}
