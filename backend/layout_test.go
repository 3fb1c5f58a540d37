package backend

import "testing"

// TestHeadRuns: the runs of a head, concatenated, are its rows in order, as
// Offset places them, in both layouts; a copy whose BSHD runs were one run
// of s·d (the BHSD rule) is caught.
func TestHeadRuns(t *testing.T) {
	const b, h, s, d = 2, 3, 5, 4
	for _, l := range []Layout{BHSD, BSHD} {
		for bb := range b {
			for hd := range h {
				var got []int
				l.HeadRuns(bb, hd, h, s, d, func(off, n int) {
					for i := range n {
						got = append(got, off+i)
					}
				})
				var want []int
				for i := range s {
					for c := range d {
						want = append(want, l.Offset(bb, hd, i, h, s, d)+c)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%v head (%d, %d): %d elements, want %d", l, bb, hd, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%v head (%d, %d): element %d at %d, want %d", l, bb, hd, i, got[i], want[i])
					}
				}
			}
		}
	}
}
