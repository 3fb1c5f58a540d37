package fp8

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestNEONCatchesMutants: the NEON conversions (quant_arm64.s), each broken
// on purpose, fail the tests that hold them, run for arm64 under
// qemu-aarch64-static (FP8ATTN_MUTANTS=1; skipped without qemu).
func TestNEONCatchesMutants(t *testing.T) {
	ms := []mutant.Mutant{
		{Name: "magic sum without its 1.5·2^14 floor (subnormal quanta)", Old: "\n\tFMAX4S(25, r, r); \\\n",
			New: "\n\tVORR R.B16, R.B16, R.B16; \\\n", Tests: []string{"TestNEONConversionsAllInputs", "TestNEONConversionsScales"}},
		{Name: "NaN keeps its sign in every mode", Old: "\n\tVAND V29.B16, X.B16, X.B16; \\\n",
			New: "\n\tVORR X.B16, X.B16, X.B16; \\\n", All: true, Tests: []string{"TestNEONConversionsAllInputs", "TestNEONConversionsScales"}},
		{Name: "overflow taken at +Inf instead of above 464", Old: "\n\tCMHI4S(23, a, s); \\\n",
			New: "\n\tCMHI4S(27, a, s); \\\n", Tests: []string{"TestNEONConversionsAllInputs", "TestNEONConversionsScales"}},
		{Name: "round's fast path loses a zero's sign", Old: "\n\tSIGN(V2, V6)\n",
			New: "\n\tVORR V6.B16, V6.B16, V6.B16\n", Tests: []string{"TestNEONConversionsAllInputs", "TestNEONConversionsScales"}},
		{Name: "round's fast path taken where a lane overflows or is NaN", Old: "\n\tCBNZW R3, round_selects\n",
			New: "\n\tCBZW R3, round_selects\n", Tests: []string{"TestNEONConversionsAllInputs", "TestNEONConversionsScales"}},
		{Name: "amax drops every lane", Old: "\n\tCMHI4S(x, 27, t); \\\n",
			New: "\n\tCMHI4S(28, 28, t); \\\n", Tests: []string{"TestNEONAmax"}},
		{Name: "decode's upper table indexed by m, not m ^ 64", Old: "\n\tVTBX V3.B16, [V20.B16, V21.B16, V22.B16, V23.B16], V4.B16\n",
			New: "\n\tVTBX V1.B16, [V20.B16, V21.B16, V22.B16, V23.B16], V4.B16\n", Tests: []string{"TestNEONDecode"}},
		{Name: "decode loses the sign", Old: "\n\tVORR V2.B16, V4.B16, V4.B16  // bits 24-31, signed\n",
			New: "\n\tVORR V4.B16, V4.B16, V4.B16\n", Tests: []string{"TestNEONDecode"}},
		{Name: "decode's bytes interleaved the wrong way round", Old: "\n\tVZIP1 V4.B16, V5.B16, V6.B16 // codes 0-7: halves byte2 | byte3<<8\n",
			New: "\n\tVZIP1 V5.B16, V4.B16, V6.B16 // codes 0-7: halves byte2 | byte3<<8\n", Tests: []string{"TestNEONDecode"}},
	}
	for i := range ms {
		ms[i].File, ms[i].Pkg, ms[i].Arch = "fp8/quant_arm64.s", "./fp8", "arm64"
	}
	mutant.Run(t, ms)
}
