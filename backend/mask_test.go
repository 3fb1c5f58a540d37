package backend

import "testing"

func TestParseMask(t *testing.T) {
	for _, m := range []Mask{NoMask, CausalUpperLeft, CausalLowerRight} {
		if got, err := ParseMask(m.String()); err != nil || got != m {
			t.Errorf("ParseMask(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "Causal", "causal-ul", "Mask(3)"} {
		if _, err := ParseMask(s); err == nil {
			t.Errorf("ParseMask(%q): no error", s)
		}
	}
}
