package layout

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend"
)

// TestPermute: every row of the BHSD input lands where Layout.Offset puts
// it, and BHSD is the identity; nil stays nil.
func TestPermute(t *testing.T) {
	const b, h, s, d = 2, 3, 4, 5
	x := make([]int, b*h*s*d)
	for i := range x {
		x[i] = i
	}
	for _, l := range []backend.Layout{backend.BHSD, backend.BSHD} {
		y := Permute(x, b, h, s, d, l)
		for bb := range b {
			for hh := range h {
				for i := range s {
					for c := range d {
						want := ((bb*h+hh)*s+i)*d + c
						if got := y[l.Offset(bb, hh, i, h, s, d)+c]; got != want {
							t.Fatalf("%v: row (%d, %d, %d) element %d is %d, want %d", l, bb, hh, i, c, got, want)
						}
					}
				}
			}
		}
	}
	if Permute[int](nil, b, h, s, d, backend.BSHD) != nil {
		t.Error("Permute(nil) is not nil")
	}
}
