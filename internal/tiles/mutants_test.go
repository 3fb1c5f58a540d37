package tiles

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestKernelDimCatchesMutants: KernelDim broken on purpose, taking head
// dims that are not multiples of 16 (a kernel would copy a partial chunk
// past the row) or refusing those below a built one, fails TestKernelDim
// (FP8ATTN_MUTANTS=1).
func TestKernelDimCatchesMutants(t *testing.T) {
	const pkg = "./internal/tiles"
	mutant.Run(t, []mutant.Mutant{
		{Name: "any positive head dim runs the next kernel up", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "if d > 0 && d%16 == 0 {", New: "if d > 0 {", Tests: []string{"TestKernelDim"}},
		{Name: "only the built head dims run", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "if k >= d {", New: "if k == d {", Tests: []string{"TestKernelDim"}},
	})
}

// TestHopperNarrowCatchesMutants: the narrow form's shared memory without
// its barriers' kilobyte, or its launch in the wide form's rows, fails
// TestHopperNarrow (FP8ATTN_MUTANTS=1).
func TestHopperNarrowCatchesMutants(t *testing.T) {
	const pkg = "./internal/tiles"
	mutant.Run(t, []mutant.Mutant{
		{Name: "no room for the barriers", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "return NarrowBlockM*c.DK + c.Ring*c.BlockN*(c.DK+c.D) + 1024 + 1024 + 1024", New: "return NarrowBlockM*c.DK + c.Ring*c.BlockN*(c.DK+c.D) + 1024 + 1024",
			Tests: []string{"TestHopperNarrow"}},
		{Name: "the wide form's rows", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "return (sq + NarrowBlockM - 1) / NarrowBlockM, hq, b, NarrowThreads", New: "return (sq + c.BlockM - 1) / c.BlockM, hq, b, NarrowThreads",
			Tests: []string{"TestHopperNarrow"}},
	})
}

// TestHopperNoLSEEntriesCatchesMutants: the entries without the float32
// row sums claimed at every head dim, or tiles.h's flag written as 0, fail
// TestHopperNoLSEEntries (FP8ATTN_MUTANTS=1).
func TestHopperNoLSEEntriesCatchesMutants(t *testing.T) {
	const pkg = "./internal/tiles"
	mutant.Run(t, []mutant.Mutant{
		{Name: "every head dim", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old:   "c := HopperConfig{D: d, BlockM: 128, BlockN: 128, Threads: 384, Ring: 3, PagedRing: 3, PVParts: 1}",
			New:   "c := HopperConfig{D: d, BlockM: 128, BlockN: 128, Threads: 384, Ring: 3, PagedRing: 3, PVParts: 1, NoLSEEntries: true}",
			Tests: []string{"TestHopperNoLSEEntries"}},
		{Name: "the header's flag always 0", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "c.NarrowSharedBytes(), b2i(c.NoLSEEntries))", New: "c.NarrowSharedBytes(), 0)",
			Tests: []string{"TestHopperNoLSEEntries"}},
	})
}

// TestHopperPagedRingCatchesMutants: the paged forms' shared memory
// without their ring's extra slots, a ring past what a block may hold, or
// tiles.h's paged ring written as the tensor form's, fail
// TestHopperPagedRing (FP8ATTN_MUTANTS=1).
func TestHopperPagedRingCatchesMutants(t *testing.T) {
	const pkg = "./internal/tiles"
	mutant.Run(t, []mutant.Mutant{
		{Name: "no room for the extra slots", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "return c.TensorSharedBytes() + (c.PagedRing-c.Ring)*c.BlockN*(c.DK+c.D)", New: "return c.TensorSharedBytes()",
			Tests: []string{"TestHopperPagedRing"}},
		{Name: "a ring of 6", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "c.PagedRing = 5", New: "c.PagedRing = 6", Tests: []string{"TestHopperPagedRing"}},
		{Name: "the header's paged ring the tensor form's", File: "internal/tiles/tiles.go", Pkg: pkg,
			Old: "c.Ring, c.PagedRing, c.SharedBytes()", New: "c.Ring, c.Ring, c.SharedBytes()", Tests: []string{"TestHopperPagedRing"}},
	})
}
