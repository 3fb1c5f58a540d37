package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestHostPipeCatchesMutants: the host pipe's waits and its chunks' queueing, broken on purpose,
// fail TestTransfer (FP8ATTN_MUTANTS=1; the fake engine's copies run late,
// so a slot rewritten or read too early shows in the bytes).
func TestHostPipeCatchesMutants(t *testing.T) {
	const pkg = "./backend/cuda"
	mutant.Run(t, []mutant.Mutant{
		{Name: "an upload refills a slot before its copy ran", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\tcase p.up:\n\t\treturn p.landed[c-p.slots].Load()", New: "\tcase p.up:\n\t\treturn true",
			Tests: []string{"TestTransfer"}},
		{Name: "a download empties a chunk before it landed", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\t}\n\treturn p.landed[c].Load()\n}", New: "\t}\n\treturn true\n}",
			Tests: []string{"TestTransfer"}},
		{Name: "a download refills a slot its chunk's other pieces still read", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "return p.left[c-p.slots].Load() == 0", New: "return p.left[c-p.slots].Load() < int32(p.pieces)",
			Tests: []string{"TestTransfer"}},
		{Name: "an upload queues a chunk before its pieces are in the ring", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "return p.left[c].Load() == 0\n", New: "return p.left[c].Load() <= 1\n",
			Tests: []string{"TestTransfer"}},
	})
}
