package allocs

import (
	"testing"

	"github.com/fp8attn/fp8attn/internal/mutant"
)

var sink []byte

// TestPerCall: a call that allocates every time counts in every window; a
// call that allocates nothing counts none; one whose allocations stop
// after its first 30 calls (a cache settling) counts none.
func TestPerCall(t *testing.T) {
	if n := PerCall(10, func() { sink = make([]byte, 64) }); n < 1 {
		t.Errorf("a call that allocates: %v allocations per call, want >= 1", n)
	}
	if n := PerCall(10, func() { sink = sink[:0] }); n != 0 {
		t.Errorf("a call that allocates nothing: %v allocations per call", n)
	}
	calls := 0
	if n := PerCall(10, func() {
		if calls++; calls <= 30 {
			sink = make([]byte, 64)
		}
	}); n != 0 {
		t.Errorf("a call that stops allocating after 30 calls: %v allocations per call", n)
	}
}

// TestPerCallCatchesMutants: PerCall broken on purpose fails TestPerCall
// (FP8ATTN_MUTANTS=1).
func TestPerCallCatchesMutants(t *testing.T) {
	const pkg, file = "./internal/allocs", "internal/allocs/allocs.go"
	tests := []string{"TestPerCall"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "one window only", File: file, Pkg: pkg, Tests: tests, Old: "const windows = 8", New: "const windows = 1"},
		{Name: "the most allocations of the windows", File: file, Pkg: pkg, Tests: tests,
			Old: "best = min(best, testing.AllocsPerRun(runs, f))", New: "best = max(best, testing.AllocsPerRun(runs, f))"},
	})
}
