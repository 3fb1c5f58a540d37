// Package allocs measures the heap allocations of a call in steady state,
// for the tests that hold calls to allocating nothing once warm.
package allocs

import "testing"

// windows is the most windows PerCall measures.
const windows = 8

// PerCall returns the fewest allocations a call of f makes, on average
// over a window of runs calls (testing.AllocsPerRun), in up to eight
// windows in a row, stopping at the first window without any. A call that
// allocates allocates in every window. The Go runtime's own caches can
// take a hundred calls or so to settle: the sudogs a goroutine takes to
// park are kept per P, so a caller that parks on one P and wakes on
// another drains the first P's cache, and allocates, until the second's
// overflows into the shared cache (seen under qemu, where helpers often
// finish after the caller has stopped polling for them). A single window
// would count those allocations as the call's.
func PerCall(runs int, f func()) float64 {
	best := testing.AllocsPerRun(runs, f)
	for i := 1; i < windows && best > 0; i++ {
		best = min(best, testing.AllocsPerRun(runs, f))
	}
	return best
}
