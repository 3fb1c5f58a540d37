//go:build !purego

package cpu

import "testing"

// TestNEONDefault: on arm64 the NEON set is the default and the Go kernels
// stay selectable.
func TestNEONDefault(t *testing.T) {
	if isas := ISAs(); len(isas) != 2 || isas[0] != "neon" || isas[1] != "go" {
		t.Fatalf("ISAs() = %v, want [neon go]", isas)
	}
	if b := New(1); b.ISA() != "neon" {
		t.Fatalf("New(1).ISA() = %q, want neon", b.ISA())
	}
}

// TestFMAPeakNEON: the NEON peak-rate loop reports its 24 four-lane FMAs an
// iteration, and no other name runs a loop.
func TestFMAPeakNEON(t *testing.T) {
	for isa, want := range map[string]float64{"neon": 1000 * 24 * 4 * 2, "avx2": 0, "go": 0} {
		if got := fmaPeak(isa, 1000); got != want {
			t.Errorf("fmaPeak(%q, 1000) = %v flops, want %v", isa, got, want)
		}
	}
}
