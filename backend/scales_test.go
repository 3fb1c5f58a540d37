package backend

import (
	"errors"
	"testing"

	"github.com/fp8attn/fp8attn/fp8"
)

// TestScalesOnReadValidate: an FP8 problem whose scales are left to the
// backend (ScalesOnRead) passes Validate with float32 inputs to quantize
// on read and no scales, even where given scales would be refused, and is
// refused without QuantizeOnRead, or with any scale given.
func TestScalesOnReadValidate(t *testing.T) {
	s := Shape{B: 1, Hq: 2, Hkv: 1, Sq: 3, Sk: 5, D: 4}
	one := []float32{1}
	for _, c := range []struct {
		name           string
		onRead, scales bool
		qs, ks, vs     []float32
		scale          float32
		ok             bool
	}{
		{"scales on read", true, true, nil, nil, nil, 1, true},
		{"a scale past the limit, scales on read", true, true, nil, nil, nil, 3e38, true},
		{"a scale past the limit, scales given", true, false, []float32{1, 1}, one, one, 3e38, false},
		{"scales given", true, false, []float32{1, 1}, one, one, 1, true},
		{"no scales, none on read", true, false, nil, nil, nil, 1, false},
		{"without QuantizeOnRead", false, true, nil, nil, nil, 1, false},
		{"Q scales given too", true, true, []float32{1, 1}, nil, nil, 1, false},
		{"V scales given too", true, true, nil, nil, one, 1, false},
	} {
		p := Problem{Shape: s, Scale: c.scale, Precision: FP8E4M3, QuantizeOnRead: c.onRead, ScalesOnRead: c.scales,
			Q: make([]float32, 24), K: make([]float32, 20), V: make([]float32, 20), Out: make([]float32, 24),
			QScale: c.qs, KScale: c.ks, VScale: c.vs}
		if !c.onRead {
			p.Q, p.K, p.V = nil, nil, nil
			p.Q8, p.K8, p.V8 = make([]fp8.E4M3, 24), make([]fp8.E4M3, 20), make([]fp8.E4M3, 20)
		}
		err := p.Validate()
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate: %v", c.name, err)
		}
	}
}
