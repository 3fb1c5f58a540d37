package backend

import (
	"errors"
	"math"
	"testing"
)

// TestVariantsValidate: Problem.Validate and PagedProblem.Validate refuse
// each malformed variant with ErrInvalid and accept the well-formed ones.
func TestVariantsValidate(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name string
		v    Variants
		mask Mask
		ok   bool
	}{
		{"none", Variants{}, NoMask, true},
		{"window causal", Variants{SlidingWindow: 4}, CausalUpperLeft, true},
		{"window lower-right", Variants{SlidingWindow: 1}, CausalLowerRight, true},
		{"window without a mask", Variants{SlidingWindow: 4}, NoMask, false},
		{"negative window", Variants{SlidingWindow: -1}, CausalLowerRight, false},
		{"huge window", Variants{SlidingWindow: math.MaxInt}, CausalLowerRight, true},
		{"softcap", Variants{Softcap: 50}, NoMask, true},
		{"negative softcap", Variants{Softcap: -1}, NoMask, false},
		{"NaN softcap", Variants{Softcap: nan}, NoMask, false},
		{"Inf softcap", Variants{Softcap: inf}, NoMask, false},
		{"sinks", Variants{Sinks: []float32{0.5, -3}}, NoMask, true},
		{"too few sinks", Variants{Sinks: []float32{0.5}}, NoMask, false},
		{"empty sinks", Variants{Sinks: []float32{}}, NoMask, false},
		{"NaN sink", Variants{Sinks: []float32{0, nan}}, NoMask, false},
		{"Inf sink", Variants{Sinks: []float32{-inf, 0}}, NoMask, false},
	}
	for _, c := range cases {
		p := Problem{Shape: Shape{B: 1, Hq: 2, Hkv: 1, Sq: 3, Sk: 5, D: 4}, Scale: 1, Mask: c.mask, Variants: c.v,
			Q: make([]float32, 24), K: make([]float32, 20), V: make([]float32, 20), Out: make([]float32, 24)}
		err := p.Validate()
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Problem.Validate: %v", c.name, err)
		}
		if c.mask == CausalUpperLeft {
			continue // a cache takes no upper-left mask
		}
		cfg := PagedConfig{KVHeads: 1, HeadDim: 4, PageSize: 4, Pages: 2}
		pp := PagedProblem{B: 1, Hq: 2, Hkv: 1, Sq: 3, D: 4, Scale: 1, Mask: c.mask, Variants: c.v,
			Q: make([]float32, 24), Out: make([]float32, 24), SeqLens: []int32{5}, BlockTable: []int32{0, 1}, PagesPerSeq: 2}
		err = pp.Validate(cfg)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: PagedProblem.Validate: %v", c.name, err)
		}
	}
}

// TestKeyRange: the keys a row sees, against a direct reading of the
// definition (a query at position p sees key j when j <= p, j < Sk, and,
// with a window W, p - W < j), for every row of shapes with Sq below, at
// and above Sk.
func TestKeyRange(t *testing.T) {
	for _, s := range []Shape{{Sq: 5, Sk: 9}, {Sq: 9, Sk: 9}, {Sq: 12, Sk: 4}, {Sq: 1, Sk: 7}} {
		for _, m := range []Mask{NoMask, CausalUpperLeft, CausalLowerRight} {
			for _, w := range []int{0, 1, 2, 3, 8, 100} {
				if w > 0 && m == NoMask {
					continue
				}
				p := &Problem{Shape: s, Mask: m, Variants: Variants{SlidingWindow: w}}
				for i := range s.Sq {
					pos := i
					if m == CausalLowerRight {
						pos = i + s.Sk - s.Sq
					}
					lo, hi := p.KeyRange(i)
					for j := range s.Sk {
						sees := m == NoMask || j <= pos && (w == 0 || pos-w < j)
						if got := j >= lo && j < hi; got != sees {
							t.Fatalf("Sq %d Sk %d %v window %d: row %d key %d: sees=%v, want %v (range %d..%d)", s.Sq, s.Sk, m, w, i, j, got, sees, lo, hi)
						}
					}
				}
			}
		}
	}
	pp := &PagedProblem{Sq: 3, Mask: CausalLowerRight, SeqLens: []int32{10, 2}, Variants: Variants{SlidingWindow: 4}}
	for _, c := range []struct{ b, i, lo, hi int }{{0, 0, 4, 8}, {0, 2, 6, 10}, {1, 0, 0, 0}, {1, 2, 0, 2}, {2, 0, 0, 0}, {-1, 0, 0, 0}} {
		if lo, hi := pp.KeyRange(c.b, c.i); lo != c.lo || hi != c.hi {
			t.Errorf("paged sequence %d query %d: keys %d..%d, want %d..%d", c.b, c.i, lo, hi, c.lo, c.hi)
		}
	}
	var nilP *Problem
	var nilPP *PagedProblem
	if lo, hi := nilP.KeyRange(0); lo != 0 || hi != 0 {
		t.Error("a nil problem sees keys")
	}
	if lo, hi := nilPP.KeyRange(0, 0); lo != 0 || hi != 0 {
		t.Error("a nil paged problem sees keys")
	}
}

// TestVariantsUnsupported: a problem with a variant gets ErrUnsupported
// naming it; one without gets nil.
func TestVariantsUnsupported(t *testing.T) {
	if err := (&Variants{}).Unsupported("x"); err != nil {
		t.Fatal(err)
	}
	for v, name := range map[*Variants]string{{SlidingWindow: 3}: "window", {Softcap: 2}: "softcap", {Sinks: []float32{1}}: "sinks"} {
		if err := v.Unsupported("x"); !errors.Is(err, ErrUnsupported) || v.Names() != name {
			t.Errorf("%s: %v (%q)", name, err, v.Names())
		}
	}
	if s := (&Variants{}).Sink(0); !math.IsInf(s, -1) {
		t.Errorf("no sinks: sink %v, want -Inf", s)
	}
}
