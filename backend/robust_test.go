package backend

import (
	"errors"
	"math"
	"testing"
)

// TestExportedNeverPanic drives the exported functions and methods of
// backend with nil receivers and sizes whose products overflow: each
// returns an error wrapping ErrInvalid (or its documented result), never
// panics.
func TestExportedNeverPanic(t *testing.T) {
	cfg := PagedConfig{KVHeads: 2, HeadDim: 64, PageSize: 64, Pages: 4}
	huge := []Shape{
		{B: 1 << 32, Hq: 1 << 32, Hkv: 1, Sq: 1, Sk: 1, D: 1},
		{B: math.MaxInt, Hq: 2, Hkv: 2, Sq: 1, Sk: 1, D: 1},
		{B: 1, Hq: 1, Hkv: 1, Sq: 1 << 40, Sk: 1 << 40, D: 1 << 40},
		{B: 1, Hq: 4, Hkv: 0, Sq: 1, Sk: 1, D: 8},
		{B: -1, Hq: -1, Hkv: 1, Sq: 1, Sk: 1, D: 8},
	}
	type probe struct {
		name string
		run  func() error // nil result: must be an error wrapping ErrInvalid
		ok   func() bool  // or a documented result, true when it holds
	}
	var nilP *Problem
	var nilPP *PagedProblem
	var nilA *PagedAppend
	probes := []probe{
		{name: "nil Problem.Validate", run: nilP.Validate},
		{name: "nil PagedProblem.Validate", run: func() error { return nilPP.Validate(cfg) }},
		{name: "nil PagedAppend.Validate", run: func() error { return nilA.Validate(cfg) }},
		{name: "Select(\"\", nil)", run: func() error { _, err := Select("", nil); return err }},
		{name: "Select(name, nil)", run: func() error { _, err := Select("x", nil); return err }},
		{name: "Register(nil)", run: func() error { return Register(nil, 0) }},
		{name: "Register of a nil pointer", run: func() error { return Register((*nilBackend)(nil), 0) }},
		{name: "PagedConfig of 2^62 pages", run: PagedConfig{KVHeads: 1, HeadDim: 1, PageSize: 4, Pages: 1 << 62}.Validate},
		{name: "PagedConfig overflowing", run: PagedConfig{KVHeads: 1 << 20, HeadDim: 1 << 20, PageSize: 1 << 20, Pages: 1 << 20}.Validate},
		{name: "PagedAppend overflowing", run: func() error { return (&PagedAppend{B: 1 << 40, N: 1 << 40}).Validate(cfg) }},
		{name: "PagedAppend under a bad config", run: func() error { return (&PagedAppend{B: 1, N: 1}).Validate(PagedConfig{}) }},
		{name: "PagedProblem overflowing", run: func() error {
			return (&PagedProblem{B: 1 << 40, Hq: 2, Hkv: 2, Sq: 1 << 40, D: 64, PagesPerSeq: 1}).Validate(cfg)
		}},
		{name: "PagedProblem under a bad config", run: func() error { return (&PagedProblem{B: 1, Hq: 1, Sq: 1, PagesPerSeq: 1}).Validate(PagedConfig{}) }},
		{name: "nil PagedProblem.Shape", ok: func() bool { return nilPP.Shape() == Shape{} }},
		{name: "nil PagedProblem.VisibleKeys", ok: func() bool { return nilPP.VisibleKeys(0, 0) == 0 }},
		{name: "PagedProblem.VisibleKeys of a missing sequence", ok: func() bool { return (&PagedProblem{SeqLens: []int32{5}}).VisibleKeys(3, 0) == 0 }},
		{name: "PagedProblem.Rows of a nil problem and of empty offsets", ok: func() bool {
			var nilP *PagedProblem
			return nilP.Rows() == 0 && (&PagedProblem{B: 1, QStarts: []int32{}}).Rows() == 0
		}},
		{name: "PagedProblem.QOffset and LSEIndex outside the batch", ok: func() bool {
			var nilP *PagedProblem
			v := &PagedProblem{B: 2, Hq: 1, Sq: 1, D: 4, QStarts: []int32{0, 1}}
			u := &PagedProblem{B: 1, Hq: 1, Sq: 1, D: 4}
			return nilP.QOffset(0, 0, 0) == -1 && nilP.LSEIndex(0, 0, 0) == -1 && v.QOffset(1, 0, 0) == -1 && v.LSEIndex(1, 0, 0) == -1 &&
				u.QOffset(1, 0, 0) == -1 && u.LSEIndex(-1, 0, 0) == -1 && u.QOffset(0, 0, 0) == 0
		}},
		{name: "nil ScoreFactor is NaN", ok: func() bool { return math.IsNaN(nilP.ScoreFactor(0)) }},
		{name: "ScoreFactor of a missing head is NaN", ok: func() bool {
			return math.IsNaN((&Problem{Shape: Shape{B: 1, Hq: 2, Hkv: 1}, QScale: []float32{1, 1}, KScale: []float32{1}}).ScoreFactor(5))
		}},
		{name: "ScoreFactor without K scales is NaN", ok: func() bool {
			return math.IsNaN((&Problem{Shape: Shape{B: 1, Hq: 2, Hkv: 1}, QScale: []float32{1, 1}}).ScoreFactor(1))
		}},
		{name: "Group without KV heads", ok: func() bool { return Shape{Hq: 4}.Group() == 0 }},
		{name: "MaxScoreFactor(0) is +Inf", ok: func() bool { return math.IsInf(MaxScoreFactor(0), 1) }},
	}
	for _, s := range huge {
		for _, prec := range []Precision{FP32, FP8E4M3} {
			p := &Problem{Shape: s, Scale: 1, Precision: prec}
			probes = append(probes, probe{name: "Problem.Validate of a huge shape", run: p.Validate},
				probe{name: "Shape.FLOPs of a huge shape", ok: func() bool { _ = s.FLOPs(CausalLowerRight); return true }})
		}
	}
	var errs, results int
	for _, c := range probes {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", c.name, r)
				}
			}()
			if c.run != nil {
				if err := c.run(); !errors.Is(err, ErrInvalid) {
					t.Errorf("%s: %v, want ErrInvalid", c.name, err)
				}
				errs++
				return
			}
			if !c.ok() {
				t.Errorf("%s: not the documented result", c.name)
			}
			results++
		}()
	}
	t.Logf("%d probes: %d errors, %d documented results", len(probes), errs, results)
}

// TestScoreFactorNaNFails: a NaN score factor (a NaN scale reaching
// checkScales) is refused, not passed as within the bound.
func TestScoreFactorNaNFails(t *testing.T) {
	p := &Problem{Shape: Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 1, D: 16}, Scale: float32(math.NaN()), Precision: FP8E4M3,
		QScale: []float32{1}, KScale: []float32{1}, VScale: []float32{1}}
	if err := p.checkScales(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a NaN score factor: %v, want ErrInvalid", err)
	}
}

// TestFLOPsClosedForm: FLOPs equals the sum over rows of VisibleKeys for
// every mask, on shapes around the causal masks' corners.
func TestFLOPsClosedForm(t *testing.T) {
	for _, sq := range []int{1, 2, 5, 16, 17} {
		for _, sk := range []int{1, 3, 5, 16, 40} {
			for _, m := range []Mask{NoMask, CausalUpperLeft, CausalLowerRight} {
				s := Shape{B: 2, Hq: 3, Hkv: 1, Sq: sq, Sk: sk, D: 8}
				var keys float64
				for i := range sq {
					keys += float64(s.VisibleKeys(m, i))
				}
				if got, want := s.FLOPs(m), 4*2*3*8*keys; got != want {
					t.Errorf("Sq=%d Sk=%d %v: FLOPs %v, want %v", sq, sk, m, got, want)
				}
			}
		}
	}
}

// nilBackend's Name dereferences its receiver, as most backends' would.
type nilBackend struct{ name string }

func (b *nilBackend) Name() string               { return b.name }
func (b *nilBackend) Supports(*Problem) error    { return nil }
func (b *nilBackend) Attention(p *Problem) error { return nil }
