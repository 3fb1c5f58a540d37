package cuda

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/sdpatest"
)

func TestParamsLayout(t *testing.T) {
	if n := unsafe.Sizeof(Params{}); n != ParamsSize {
		t.Fatalf("Params is %d bytes, attention.cu's struct is %d", n, ParamsSize)
	}
	if off := unsafe.Offsetof(Params{}.ScaleLog2); off != 200 {
		t.Fatalf("ScaleLog2 at offset %d, want 200", off)
	}
}

func TestTiles(t *testing.T) {
	for _, st := range Stages {
		for _, d := range HeadDims {
			tc, err := Tiles(st, d)
			if err != nil || tc.BlockM%16 != 0 || tc.Threads%32 != 0 || tc.BlockN%16 != 0 {
				t.Errorf("stage %d d %d: %+v %v", st, d, tc, err)
			}
		}
	}
	if _, err := Tiles(3, 96); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("d=96: %v", err)
	}
	if _, err := Tiles(9, 64); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("stage 9: %v", err)
	}
	tc, _ := Tiles(4, 64)
	if x, y, z := tc.Grid(backend.Shape{B: 2, Hq: 8, Sq: 256}); x != 8 || y != 8 || z != 2 {
		t.Errorf("grid %d %d %d", x, y, z)
	}
}

// TestBestStage: the shape-based choice recorded in docs/PERF.md.
func TestBestStage(t *testing.T) {
	for _, tc := range []struct {
		s    backend.Shape
		want int
	}{
		{sdpatest.NamedShapes["small"], 5},
		{sdpatest.NamedShapes["mission"], 5},
		{sdpatest.NamedShapes["long"], 7},
		{sdpatest.NamedShapes["large"], 6},
		{backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 513, D: 64}, 7},
	} {
		if got := BestStage(tc.s); got != tc.want {
			t.Errorf("BestStage(%v) = %d, want %d", tc.s, got, tc.want)
		}
		if _, err := Tiles(BestStage(tc.s), tc.s.D); err != nil {
			t.Errorf("BestStage(%v): %v", tc.s, err)
		}
	}
}
