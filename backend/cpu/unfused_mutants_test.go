package cpu_test

import (
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestUnfusedStepCatchesMutants: the kernels of the unfused step that the
// sets without fused steps run (the AVX2 set's softcap, its scores on part
// of a panel and its output scaling), and the driver's use of them, broken
// on purpose, fail their kernel tests or the conformance suite
// (FP8ATTN_MUTANTS=1; skipped on a CPU without the AVX2 set; the NEON
// set's kernels are in TestNEONCatchesMutants).
func TestUnfusedStepCatchesMutants(t *testing.T) {
	const pkg = "./backend/cpu"
	softcap, dense := []string{"TestSoftcapKernel"}, []string{"TestConformance"}
	noAVX2 := ""
	if !slices.Contains(cpu.ISAs(), "avx2") {
		noAVX2 = "no AVX2 kernel set on this CPU"
	}
	const avx2, wrappers, driver = "backend/cpu/kernels_avx2_amd64.s", "backend/cpu/kernels_amd64.go", "backend/cpu/attend.go"
	ms := []mutant.Mutant{
		{Name: "AVX2 softcap: the score's sign not restored", File: avx2,
			Old: "\tVORPS Y3, Y1, Y1\n\tVMOVUPS Y1, (SI)\n", New: "\tVMOVUPS Y1, (SI)\n", Tests: softcap},
		{Name: "AVX2 softcap: the exponential of x·m2, not of |x|·m2", File: avx2,
			Old: "\tVANDPS absMask8<>(SB), Y0, Y0\n", New: "\n", Tests: softcap},
		{Name: "AVX2 softcap: ck/(1+e) times (1-e), another rounding", File: avx2,
			Old: "\tVMULPS Y4, Y1, Y1\n\tVDIVPS Y2, Y1, Y1\n", New: "\tVDIVPS Y2, Y4, Y2\n\tVMULPS Y2, Y1, Y1\n", Tests: softcap},
		{Name: "AVX2 softcap: the elements past the last whole vector left as they are", File: wrappers,
			Old: "softcapTail(s[n8:], m2, ck)", New: "_ = n8", Tests: softcap},
		{Name: "AVX2 scaleRows: the columns after the last eight left as they are", File: avx2,
			Old: "\tANDQ $7, BX\n\tJZ scalerows8avx2_next\n", New: "\tJMP scalerows8avx2_next\n", Tests: []string{"TestScaleRows"}},
		{Name: "AVX2 scaleRows: dst's rows d apart, not stride", File: avx2,
			Old: "\tADDQ R8, DI\n\tADDQ $4, DX\n", New: "\tMOVQ R10, DI\n\tADDQ $4, DX\n", Tests: []string{"TestScaleRows"}},
		{Name: "the partial panel's scores from the keys all rows see", File: driver,
			Old: "if u0, u1 := k.u0, k.u1; ks.scoresKeys4 != nil", New: "if u0, u1 := min(k.lo4, k.u1-1), k.u1; ks.scoresKeys4 != nil", Tests: dense},
		{Name: "the partial panel's softcap on its first row alone", File: driver,
			Old: "for r := range 4 {\n\t\t\t\t\t\t\t\tsoftcapRow(ks, s[r*panel+u0:r*panel+u1]", New: "for r := range 1 {\n\t\t\t\t\t\t\t\tsoftcapRow(ks, s[r*panel+u0:r*panel+u1]", Tests: dense},
	}
	for i := range ms {
		ms[i].Pkg, ms[i].Skip = pkg, noAVX2
	}
	mutant.Run(t, ms)
}
