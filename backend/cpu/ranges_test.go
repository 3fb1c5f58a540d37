package cpu_test

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestRangeTakes: the blocks of a range, taken from its front by one
// goroutine or from both ends by several at once, are each taken exactly
// once, and every next block a take names lies in the range.
func TestRangeTakes(t *testing.T) {
	for _, c := range []struct{ front, back, takers int }{
		{0, 0, 2}, {0, 1, 2}, {3, 4, 4}, {0, 10, 1}, {0, 64, 2}, {5, 1000, 4}, {0, 5000, 8},
	} {
		for round := range 20 {
			counts, badNext := cpu.TakeAll(c.front, c.back, c.takers)
			for i, n := range counts {
				want := int32(0)
				if i >= c.front {
					want = 1
				}
				if n != want {
					t.Fatalf("%+v round %d: block %d taken %d times, want %d", c, round, i, n, want)
				}
			}
			if badNext {
				t.Fatalf("%+v round %d: a take named a next block outside the range", c, round)
			}
		}
	}
}

// TestRangeCatchesMutants: the ranges broken on purpose fail
// TestRangeTakes (FP8ATTN_MUTANTS=1).
func TestRangeCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cpu", "backend/cpu/block.go"
	tests := []string{"TestRangeTakes"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a front take names a next block one too far", File: file, Pkg: pkg,
			Old: "it, next = front, front+1", New: "it, next = front, front+2", Tests: tests},
		{Name: "a back take leaves the back in place", File: file, Pkg: pkg,
			Old: "\t\t\tback--\n", New: "", Tests: tests},
	})
}
