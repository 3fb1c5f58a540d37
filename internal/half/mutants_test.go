package half

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestChecksCatchMutants: the conversions and the scale, broken on
// purpose, fail the tests that hold them (FP8ATTN_MUTANTS=1).
func TestChecksCatchMutants(t *testing.T) {
	const pkg = "./internal/half"
	mutant.Run(t, []mutant.Mutant{
		{Name: "ties round away from zero", File: "internal/half/half.go", Pkg: pkg,
			Old: "r == halfway && q&1 == 1", New: "r == halfway",
			Tests: []string{"TestFromFloat32"}},
		{Name: "subnormals start one exponent late", File: "internal/half/half.go", Pkg: pkg,
			Old: "shift := max(13, -1-e)", New: "shift := max(13, -2-e)",
			Tests: []string{"TestFromFloat32"}},
		{Name: "a subnormal float16 reads as twice its value", File: "internal/half/half.go", Pkg: pkg,
			Old: "v := float32(m) * 0x1p-24", New: "v := float32(m) * 0x1p-23",
			Tests: []string{"TestToFloat32Every"}},
		{Name: "the Go loop's product is off by a factor of two", File: "internal/half/half.go", Pkg: pkg,
			Old: "k := unit * 0x1p112", New: "k := unit * 0x1p111",
			Tests: []string{"TestDecode"}},
		{Name: "the Go loop takes Inf and NaN through the product", File: "internal/half/half.go", Pkg: pkg,
			Old: "if h&0x7c00 == 0x7c00 {", New: "if h&0x7c00 == 0x7c01 {",
			Tests: []string{"TestDecode"}},
		{Name: "the kernel leaves out the unit", File: "internal/half/decode_amd64.s", Pkg: pkg, All: true,
			Old: "VMULPS Y15, Y0, Y0\n", New: "\n",
			Tests: []string{"TestDecode"}},
		{Name: "the kernel's rounds of 32 read the second eight twice", File: "internal/half/decode_amd64.s", Pkg: pkg,
			Old: "VCVTPH2PS 32(SI), Y2", New: "VCVTPH2PS 16(SI), Y2",
			Tests: []string{"TestDecode"}},
		{Name: "the NEON kernel leaves out the unit in the lower four", File: "internal/half/decode_arm64.s", Pkg: pkg, Arch: "arm64",
			Old: "FMUL4S(3, 1, 1)\n", New: "\n",
			Tests: []string{"TestDecode"}},
		{Name: "the NEON kernel converts the lower four twice", File: "internal/half/decode_arm64.s", Pkg: pkg, Arch: "arm64",
			Old: "FCVTL24S(0, 2)", New: "FCVTL4S(0, 2)",
			Tests: []string{"TestDecode"}},
		{Name: "the Go loop's product overflows for units from 2^16", File: "internal/half/half.go", Pkg: pkg,
			Old: "u >= 0x1p16 ||", New: "u >= 0x1p17 ||",
			Tests: []string{"TestDecode"}},
		{Name: "Decode trusts dst's length", File: "internal/half/half.go", Pkg: pkg,
			Old: "dst = dst[:min(len(dst), len(src)/2)]", New: "",
			Tests: []string{"TestDecodeLengths"}},
		{Name: "the rounding truncates", File: "internal/half/half.go", Pkg: pkg,
			Old: "if r > halfway || r == halfway && q&1 == 1 {", New: "if r > halfway && r == 0 {",
			Tests: []string{"TestRoundRMS"}},
		{Name: "the scale leaves room for no rounding", File: "internal/half/half.go", Pkg: pkg,
			Old: "k := min(15-e, 127)", New: "k := min(16-e, 127)",
			Tests: []string{"TestScaleAndRound"}},
	})
}
