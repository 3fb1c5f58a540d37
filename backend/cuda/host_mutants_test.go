package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestHostPipeCatchesMutants: the host pipe's waits, broken on purpose,
// fail TestTransfer (FP8ATTN_MUTANTS=1; the fake engine's copies run late,
// so a slot rewritten or read too early shows in the bytes).
func TestHostPipeCatchesMutants(t *testing.T) {
	const pkg = "./backend/cuda"
	mutant.Run(t, []mutant.Mutant{
		{Name: "an upload refills a slot before its copy ran", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "case p.up && c >= p.slots:", New: "case p.up && c >= p.n:",
			Tests: []string{"TestTransfer"}},
		{Name: "a download empties a chunk before it landed", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "case !p.up:\n\t\t\tif !p.await(c) {", New: "case false:\n\t\t\tif !p.await(c) {",
			Tests: []string{"TestTransfer"}},
		{Name: "a download refills a slot its chunk's other pieces still read", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "if p.left[c].Add(-1) != 0 {", New: "if p.left[c].Add(-1) < 0 {",
			Tests: []string{"TestTransfer"}},
	})
}
