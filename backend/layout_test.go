package backend

import "testing"

// TestHeadRuns: the runs of a head (HeadRuns), and of each range of its
// rows (RowRuns; an empty or reversed range has none), concatenated, are
// those rows in order, as Offset places them, in both layouts, and none is
// empty; a copy whose BSHD runs were one run of s·d (the BHSD rule) is
// caught.
func TestHeadRuns(t *testing.T) {
	const b, h, s, d = 2, 3, 5, 4
	for _, l := range []Layout{BHSD, BSHD} {
		for bb := range b {
			for hd := range h {
				check := func(what string, lo, hi int, runs func(fn func(off, n int))) {
					var got, want []int
					runs(func(off, n int) {
						if n <= 0 {
							t.Fatalf("%v head (%d, %d) %s [%d, %d): a run of %d elements", l, bb, hd, what, lo, hi, n)
						}
						for i := range n {
							got = append(got, off+i)
						}
					})
					for i := lo; i < hi; i++ {
						for c := range d {
							want = append(want, l.Offset(bb, hd, i, h, s, d)+c)
						}
					}
					if len(got) != len(want) {
						t.Fatalf("%v head (%d, %d) %s: %d elements, want %d", l, bb, hd, what, len(got), len(want))
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%v head (%d, %d) %s: element %d at %d, want %d", l, bb, hd, what, i, got[i], want[i])
						}
					}
				}
				check("whole", 0, s, func(fn func(off, n int)) { l.HeadRuns(bb, hd, h, s, d, fn) })
				for r0 := range s + 1 {
					for r1 := range s + 1 {
						check("rows", r0, r1, func(fn func(off, n int)) { l.RowRuns(bb, hd, h, s, d, r0, r1, fn) })
					}
				}
			}
		}
	}
}
