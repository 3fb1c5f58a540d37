package cpu

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestNEONCatchesMutants: the NEON kernels (kernels_arm64.s), each broken
// on purpose, fail the tests that hold them, run for arm64 under
// qemu-aarch64-static (FP8ATTN_MUTANTS=1; skipped without qemu).
func TestNEONCatchesMutants(t *testing.T) {
	ms := []mutant.Mutant{
		{Name: "scores use lane 2 of q twice", Old: "\n\tVLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]\n\tFMA16E(3)\n",
			New: "\n\tVLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]\n\tFMA16E(2)\n", Tests: []string{"TestKernels"}},
		{Name: "rowMax skips every fourth vector", Old: "\n\tFMAX4S(7, 3, 3)\n",
			New: "\n\tVORR V3.B16, V3.B16, V3.B16\n", Tests: []string{"TestKernels"}},
		{Name: "expSum does not flush below the normal range", Old: "\n\tVBIT V1.B16, V19.B16, V4.B16\n",
			New: "\n\tVORR V4.B16, V4.B16, V4.B16\n", Tests: []string{"TestKernels", "TestExpSumError"}},
		{Name: "expSum's k not rounded", Old: "\n\tFRINTA4S(k, k); \\\n",
			New: "\n\tVORR K.B16, K.B16, K.B16; \\\n", Tests: []string{"TestExpSumError"}},
		{Name: "transpose writes dim 0 for dim 2", Old: "\n\tVTRN2 V6.D2, V4.D2, V18.D2 // dim 2\n",
			New: "\n\tVTRN1 V6.D2, V4.D2, V18.D2\n", Tests: []string{"TestKernels"}},
		{Name: "scaleRows leaves its last d mod 4 columns unscaled", Old: "\n\tFMULS F31, F0, F0\n",
			New: "\n\tFMOVS F0, F0\n", Tests: []string{"TestScaleRows"}},
		{Name: "pv4 drops the keys after the last four", Old: "\npv4_o16:\n\tLOAD1ROWS(R9, R10, R11, R12)\n\tVLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]\n\tFMA16\n",
			New: "\npv4_o16:\n\tLOAD1ROWS(R9, R10, R11, R12)\n\tVLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]\n\tVORR V0.B16, V0.B16, V0.B16\n", Tests: []string{"TestKernels"}},
		{Name: "pv1 skips the rescale of its last columns", Old: "\npv1_c4:\n\tCBZ R5, pv1_done\n\tVLD1 (R0), [V0.S4]\n\tFMUL4S_E(30, 0, 0, 0)\n",
			New: "\npv1_c4:\n\tCBZ R5, pv1_done\n\tVLD1 (R0), [V0.S4]\n\tVORR V0.B16, V0.B16, V0.B16\n", Tests: []string{"TestKernels"}},
		{Name: "softcap leaves its scores' signs off", Old: "\n\tVORR V5.B16, V6.B16, V6.B16\n\tVST1.P [V6.S4], 16(R0)\n",
			New: "\n\tVST1.P [V6.S4], 16(R0)\n", Tests: []string{"TestSoftcapKernel"}},
		{Name: "softcap exponentiates x·m2, not |x|·m2", Old: "\n\tFABS4S(0, 0)\n",
			New: "\n", Tests: []string{"TestSoftcapKernel"}},
		{Name: "softcap multiplies by 1 + e", Old: "\n\tFDIV4S(7, 6, 6)\n",
			New: "\n\tFMUL4S(7, 6, 6)\n", Tests: []string{"TestSoftcapKernel"}},
		{Name: "scores on part of a panel compute one block of keys", Old: "\n\tMOVD blocks+40(FP), R10\n",
			New: "\n\tMOVD $1, R10\n", Tests: []string{"TestScoresKeys4"}},
		{Name: "scores' rows a panel apart, not stride", Old: "\n\tMOVD stride+48(FP), R16\n\tLSL $2, R16, R16\n\ns4_block:",
			New: "\n\tMOVD $64, R16\n\tLSL $2, R16, R16\n\ns4_block:", Tests: []string{"TestScoresKeys4"}},
		{Name: "pv4's weights' rows a panel apart, not stride", Old: "\n\tMOVD stride+48(FP), R16\n\tLSL $2, R16, R16\n\tMOVD alpha+56(FP), R6",
			New: "\n\tMOVD $64, R16\n\tLSL $2, R16, R16\n\tMOVD alpha+56(FP), R6", Tests: []string{"TestPV4Strided"}},
	}
	for i := range ms {
		ms[i].File, ms[i].Pkg, ms[i].Arch = "backend/cpu/kernels_arm64.s", "./backend/cpu", "arm64"
	}
	mutant.Run(t, ms)
}
