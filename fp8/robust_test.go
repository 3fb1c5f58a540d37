package fp8

import (
	"errors"
	"math"
	"testing"
	"unsafe"
)

// asE4M3 and asE5M2 view bytes as codes.
func asE4M3(b []byte) []E4M3 { return unsafe.Slice((*E4M3)(unsafe.SliceData(b)), len(b)) }
func asE5M2(b []byte) []E5M2 { return unsafe.Slice((*E5M2)(unsafe.SliceData(b)), len(b)) }

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
	// Bulk conversions take min(len(dst), len(src)) and say so; the
	// encoders refuse a scale they cannot divide by, and a mode they do
	// not know, writing nothing.
	for _, n := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {3, 9}, {9, 3}} {
		for _, sc := range []struct {
			scale float32
			m     Mode
			bad   bool
		}{{1, NoSat, false}, {1e-45, NoSat, false}, {-2, NoSat, false}, {0, NoSat, true}, {float32(math.Copysign(0, -1)), NoSat, true},
			{float32(math.NaN()), NoSat, true}, {float32(math.Inf(1)), NoSat, true}, {float32(math.Inf(-1)), NoSat, true},
			{1, SatFinite, false}, {1, Torch, false}, {1, Mode(99), true}, {1, Mode(-1), true}} {
			src := make([]float32, n[1])
			for i := range src {
				src[i] = float32(i + 1)
			}
			codes := make([]E4M3, n[1])
			want := min(n[0], n[1])
			if sc.bad {
				want = 0
			}
			for _, name := range []string{"EncodeE4M3", "EncodeE5M2", "RoundE4M3"} {
				dst := make([]byte, n[0])
				for i := range dst {
					dst[i] = 0x55
				}
				var got int
				var err error
				call(name, func() {
					switch name {
					case "EncodeE4M3":
						got, err = EncodeE4M3(asE4M3(dst), src, sc.scale, sc.m)
					case "EncodeE5M2":
						got, err = EncodeE5M2(asE5M2(dst), src, sc.scale, sc.m)
					default: // written: a nonzero value where zeros were
						f := make([]float32, n[0])
						got, err = RoundE4M3(f, src, sc.scale, sc.m)
						for i, x := range f {
							if x != 0 {
								dst[i] = 0
							}
						}
					}
				})
				if got != want || sc.bad != errors.Is(err, ErrInvalid) {
					t.Errorf("%s %v scale %v mode %d: wrote %d, err %v; want %d, error %v", name, n, sc.scale, int(sc.m), got, err, want, sc.bad)
				}
				for i, b := range dst {
					if sc.bad && b != 0x55 {
						t.Errorf("%s %v scale %v: element %d written with an error", name, n, sc.scale, i)
						break
					}
				}
			}
			if got := DecodeE4M3(make([]float32, n[0]), codes, sc.scale); got != min(n[0], n[1]) {
				t.Errorf("DecodeE4M3 %v: wrote %d", n, got)
			}
			if got := DecodeE5M2(make([]float32, n[0]), make([]E5M2, n[1]), sc.scale); got != min(n[0], n[1]) {
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
			if _, _, err := QuantizeE4M3(x, g); !errors.Is(err, ErrInvalid) {
				t.Errorf("QuantizeE4M3 group %d of 12: %v, want ErrInvalid", g, err)
			}
		})
		call("QuantizeE4M3Into", func() {
			if err := QuantizeE4M3Into(make([]E4M3, 12), make([]float32, 3), x, g); !errors.Is(err, ErrInvalid) {
				t.Errorf("QuantizeE4M3Into group %d of 12: %v, want ErrInvalid", g, err)
			}
		})
	}
	for _, c := range []struct{ codes, scales int }{{11, 3}, {12, 2}, {12, 4}, {0, 0}, {13, 3}} {
		call("QuantizeE4M3Into", func() {
			if err := QuantizeE4M3Into(make([]E4M3, c.codes), make([]float32, c.scales), x, 4); !errors.Is(err, ErrInvalid) {
				t.Errorf("QuantizeE4M3Into with %d codes and %d scales: %v, want ErrInvalid", c.codes, c.scales, err)
			}
		})
	}
	if err := QuantizeE4M3Into(make([]E4M3, 12), make([]float32, 3), x, 4); err != nil {
		t.Errorf("QuantizeE4M3Into, consistent: %v", err)
	}
}
