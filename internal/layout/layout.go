// Package layout holds tensor layout helpers that tests, the oracle and the
// conformance suite share, and that are no part of a backend's contract.
package layout

import "github.com/fp8attn/fp8attn/backend"

// Permute returns a copy of x, a [b][h][s][d] tensor in BHSD order, in
// layout l (nil stays nil).
func Permute[T any](x []T, b, h, s, d int, l backend.Layout) []T {
	if x == nil {
		return nil
	}
	y := make([]T, len(x))
	for bb := 0; bb < b; bb++ {
		for hh := 0; hh < h; hh++ {
			for i := 0; i < s; i++ {
				src, dst := ((bb*h+hh)*s+i)*d, l.Offset(bb, hh, i, h, s, d)
				copy(y[dst:dst+d], x[src:src+d])
			}
		}
	}
	return y
}
