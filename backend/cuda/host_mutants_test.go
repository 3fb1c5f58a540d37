package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestHostPipeCatchesMutants: the host pipe's waits, its chunks'
// queueing, the encoding of codes, the round trip's order and its float16
// output, broken on purpose, fail TestTransfer, TestTransferEncoded,
// TestRoundTrip or TestRoundTripHalves
// (FP8ATTN_MUTANTS=1; the fake engine's copies and the prologue's items
// run late, so a slot rewritten or read too early, or a scale read before
// it is computed, shows in the bytes; in TestTransfer's lead-alone cases a
// slot refilled, or copied, too early shows on every run).
func TestHostPipeCatchesMutants(t *testing.T) {
	const pkg = "./backend/cuda"
	mutant.Run(t, []mutant.Mutant{
		{Name: "a float16 piece lands at its chunk's offset, not its segment's", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "half.Decode(s.dec.out[(x-s.off)/2:(y-s.off)/2]", New: "half.Decode(s.dec.out[(x-lo)/2:(y-lo)/2]",
			Tests: []string{"TestRoundTripHalves"}},
		{Name: "a float16 segment's size counts its elements, not its bytes", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "return 2 * len(s.dec.out)", New: "return len(s.dec.out)",
			Tests: []string{"TestRoundTripHalves"}},
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
		{Name: "a chunk's pieces wait for no prologue item", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "p.proOK[c].Store(need[1] <= need[0])", New: "p.proOK[c].Store(true)",
			Tests: []string{"TestTransferEncoded", "TestPlanPrologue"}},
		{Name: "the scales go up before every item ran", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\t\t\tcase s.after:\n", New: "\t\t\tcase s.after && false:\n",
			Tests: []string{"TestTransferEncoded", "TestPlanPrologue"}},
		{Name: "a BHSD piece waits for one head too few", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "return e0 / block, (e1-1)/block + 1", New: "return e0 / block, (e1-1)/block",
			Tests: []string{"TestTransferEncoded", "TestEncodeGroups"}},
		{Name: "a BSHD piece waits for its first batch entry's heads only", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "return e0 / entry * s.heads, ((e1-1)/entry + 1) * s.heads", New: "return e0 / entry * s.heads, (e0/entry + 1) * s.heads",
			Tests: []string{"TestTransferEncoded", "TestEncodeGroups"}},
		{Name: "a BSHD row takes the scale of its head in the first batch entry", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "return s.d - e%s.d, b*s.heads + row%s.heads", New: "return s.d - e%s.d, b*0 + row%s.heads",
			Tests: []string{"TestTransferEncoded"}},
		{Name: "an item reads the first tensor's heads", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "if s = &t[k]; i < len(s.scales)*s.parts {", New: "if s = &t[k*0]; i < len(s.scales)*s.parts {",
			Tests: []string{"TestTransferEncoded"}},
		{Name: "a part's amax replaces a larger one", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "if math.Float32frombits(old) >= m ||", New: "if false ||",
			Tests: []string{"TestTransferEncoded"}},
		{Name: "a head's first part to finish writes its scale", File: "backend/cuda/host_encode.go", Pkg: pkg,
			Old: "if acc.left.Add(-1) == 0 {", New: "if acc.left.Add(-1) == int32(s.parts)-1 {",
			Tests: []string{"TestTransferEncoded"}},
		{Name: "the work leaves a chunk's last piece out", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "for j := range p.pieces {\n\t\t\tp.work", New: "for j := range p.pieces - 1 {\n\t\t\tp.work",
			Tests: []string{"TestPlanPrologue"}},
		{Name: "the work puts a chunk's items after its pieces", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "upTo = max(upTo, p.need[a][1])", New: "upTo = max(upTo, p.need[max(c-1, 0)][1])",
			Tests: []string{"TestPlanPrologue"}},
		{Name: "the work puts the next chunk's items after a chunk's pieces", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\titemLookahead = 1\n", New: "\titemLookahead = 0\n",
			Tests: []string{"TestPlanPrologue"}},
		{Name: "a round trip runs between before its upload is queued", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\tx.up.lead()\n\tif x.up.failed.Load() {", New: "\tx.between()\n\tx.up.lead()\n\tif x.up.failed.Load() {",
			Tests: []string{"TestRoundTrip"}},
		{Name: "a round trip runs between after its upload failed", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\tif x.up.failed.Load() {\n", New: "\tif false {\n",
			Tests: []string{"TestRoundTrip"}},
		{Name: "an upload ends before its prologue's items have all run", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "(p.up && p.prologueDone() ||", New: "(p.up ||",
			Tests: []string{"TestPrologueRuns"}},
		{Name: "a round trip drops the error of between", File: "backend/cuda/host_pipe.go", Pkg: pkg,
			Old: "\tif err := x.between(); err != nil {\n\t\tx.down.fail(err)\n\t\treturn\n\t}", New: "\tx.between()",
			Tests: []string{"TestRoundTrip"}},
	})
}
