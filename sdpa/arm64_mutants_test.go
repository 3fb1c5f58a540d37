package sdpa

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestArm64FusionCatchesMutants: host code whose result must not be fused
// into multiply-adds (arm64's compiler fuses x*y ± z unless a conversion
// rounds the product), with the rounding conversions taken out, fails its
// tests run for arm64 under qemu-aarch64-static (FP8ATTN_MUTANTS=1;
// skipped without qemu).
func TestArm64FusionCatchesMutants(t *testing.T) {
	mutant.Run(t, []mutant.Mutant{
		{Name: "the LSE shift's products fused into its sums", File: "sdpa/transform.go", Pkg: "./sdpa", Arch: "arm64",
			Old: "dot += float64(float64(x) * m[c])", New: "dot += float64(x) * m[c]",
			Tests: []string{"TestLSEShiftRounding"}},
		{Name: "splitRow's high part fused into the remainder", File: "sdpa/outliers.go", Pkg: "./sdpa", Arch: "arm64",
			Old: "hi := float32(fp8.ToE4M3(x/scale, fp8.NoSat).Float32() * scale)", New: "hi := fp8.ToE4M3(x/scale, fp8.NoSat).Float32() * scale",
			Tests: []string{"TestSplitRowExact"}},
	})
}
