package sdpatest

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend"
)

func TestParseShape(t *testing.T) {
	for _, c := range []struct {
		in   string
		want backend.Shape
		ok   bool
	}{
		{"mission", NamedShapes["mission"], true},
		{"2x8x256x128x64", backend.Shape{B: 2, Hq: 8, Hkv: 8, Sq: 256, Sk: 128, D: 64}, true},
		{"1x32x8x1x8192x128", backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 1, Sk: 8192, D: 128}, true},
		{"", backend.Shape{}, false},
		{"huge", backend.Shape{}, false},
		{"2x8x256x64", backend.Shape{}, false},                       // four sizes
		{"1x2x3x4x5x6x7", backend.Shape{}, false},                    // seven
		{"2x8x0x256x64", backend.Shape{}, false},                     // a zero size
		{"2x-8x256x256x64", backend.Shape{}, false},                  // a negative one
		{"2x8x256x256x64.5", backend.Shape{}, false},                 // not an int
		{"2x8x256x256x99999999999999999999", backend.Shape{}, false}, // beyond int
		{"2x8x256x256x64:causal", backend.Shape{}, false},
		{"4294967296x4294967296x1x1x1", backend.Shape{}, false}, // elements beyond int
		{"1x1x4294967296x4294967296x1", backend.Shape{}, false}, // scores beyond int
	} {
		got, err := ParseShape(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseShape(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}
