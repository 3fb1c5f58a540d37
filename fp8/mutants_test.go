package fp8

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestChecksCatchMutants: the scale, mode and group checks, broken on purpose,
// and a GPU table swapped for another, fail the test that proves them
// (FP8ATTN_MUTANTS=1).
func TestChecksCatchMutants(t *testing.T) {
	const pkg = "./fp8"
	mutant.Run(t, []mutant.Mutant{
		{Name: "a zero scale encodes", File: "fp8/bulk.go", Pkg: pkg,
			Old: "if scale == 0 || math.IsNaN(float64(scale))", New: "if math.IsNaN(float64(scale))",
			Tests: []string{"TestExportedFunctionsNeverPanic"}},
		{Name: "group errors wrap nothing", File: "fp8/quant.go", Pkg: pkg,
			Old: `"%w: group length %d does not divide %d elements", ErrInvalid,`, New: `"%v: group length %d does not divide %d elements", ErrInvalid,`,
			Tests: []string{"TestExportedFunctionsNeverPanic"}},
		{Name: "an unknown mode encodes", File: "fp8/bulk.go", Pkg: pkg,
			Old: "if m != SatFinite && m != NoSat && m != Torch {", New: "if false {",
			Tests: []string{"TestExportedFunctionsNeverPanic"}},
		{Name: "the exhaustive pass compares NoSat's E4M3 codes to SatFinite's table", File: "fp8/tables_test.go", Pkg: pkg,
			Old: `{"cuda_device_e4m3_nosat.rle", 0, NoSat}`, New: `{"cuda_device_e4m3_satfinite.rle", 0, NoSat}`,
			Tests: []string{"TestConvertExhaustive"}},
	})
}
