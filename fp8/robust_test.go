package fp8

import (
	"math"
	"testing"
)

// TestExportedFunctionsNeverPanic drives every exported function of fp8
// with inconsistent lengths and extreme values: each returns an error or
// its documented result, never panics.
func TestExportedFunctionsNeverPanic(t *testing.T) {
	call := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", what, r)
			}
		}()
		fn()
	}
	extremes := []float32{0, float32(math.Copysign(0, -1)), 1e-45, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, m := range []Mode{SatFinite, NoSat, Torch, Mode(-1), Mode(99)} {
		for _, x := range extremes {
			call("ToE4M3", func() { ToE4M3(x, m) })
			call("ToE5M2", func() { ToE5M2(x, m) })
		}
		_ = m.String()
	}
	for c := 0; c < 256; c++ {
		call("Float32/IsNaN", func() {
			_, _, _, _ = E4M3(c).Float32(), E5M2(c).Float32(), E4M3(c).IsNaN(), E5M2(c).IsNaN()
		})
	}
	call("tables", func() { _, _ = E4M3Table(), E5M2Table() })
	// Bulk conversions take min(len(dst), len(src)) and say so.
	for _, n := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {3, 9}, {9, 3}} {
		for _, scale := range []float32{1, 0, float32(math.NaN()), float32(math.Inf(1)), 1e-45} {
			src := make([]float32, n[1])
			codes := make([]E4M3, n[1])
			if got := EncodeE4M3(make([]E4M3, n[0]), src, scale, NoSat); got != min(n[0], n[1]) {
				t.Errorf("EncodeE4M3 %v: wrote %d", n, got)
			}
			if got := EncodeE5M2(make([]E5M2, n[0]), src, scale, NoSat); got != min(n[0], n[1]) {
				t.Errorf("EncodeE5M2 %v: wrote %d", n, got)
			}
			if got := DecodeE4M3(make([]float32, n[0]), codes, scale); got != min(n[0], n[1]) {
				t.Errorf("DecodeE4M3 %v: wrote %d", n, got)
			}
			if got := DecodeE5M2(make([]float32, n[0]), make([]E5M2, n[1]), scale); got != min(n[0], n[1]) {
				t.Errorf("DecodeE5M2 %v: wrote %d", n, got)
			}
		}
	}
	call("Amax", func() {
		if a := Amax(extremes); a != math.MaxFloat32 {
			t.Errorf("Amax = %v", a)
		}
		if a := Amax(nil); a != 0 {
			t.Errorf("Amax(nil) = %v", a)
		}
	})
	for _, a := range extremes {
		call("ScaleForAmax", func() {
			if s := ScaleForAmax(a); !(s > 0) || math.IsInf(float64(s), 0) {
				if a == a && !math.IsInf(float64(a), 0) && a >= 0 {
					t.Errorf("ScaleForAmax(%v) = %v, not positive and finite", a, s)
				}
			}
		})
	}
	x := make([]float32, 12)
	for _, g := range []int{0, -1, 5, 13, math.MaxInt, math.MinInt} {
		call("QuantizeE4M3", func() {
			if _, _, err := QuantizeE4M3(x, g); err == nil {
				t.Errorf("QuantizeE4M3 group %d of 12: no error", g)
			}
		})
		call("QuantizeE4M3Into", func() {
			if err := QuantizeE4M3Into(make([]E4M3, 12), make([]float32, 3), x, g); err == nil {
				t.Errorf("QuantizeE4M3Into group %d of 12: no error", g)
			}
		})
	}
	for _, c := range []struct{ codes, scales int }{{11, 3}, {12, 2}, {12, 4}, {0, 0}, {13, 3}} {
		call("QuantizeE4M3Into", func() {
			if err := QuantizeE4M3Into(make([]E4M3, c.codes), make([]float32, c.scales), x, 4); err == nil {
				t.Errorf("QuantizeE4M3Into with %d codes and %d scales: no error", c.codes, c.scales)
			}
		})
	}
	if err := QuantizeE4M3Into(make([]E4M3, 12), make([]float32, 3), x, 4); err != nil {
		t.Errorf("QuantizeE4M3Into, consistent: %v", err)
	}
}
