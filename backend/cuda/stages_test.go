package cuda

import (
	"errors"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

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
		if _, err := tiles.Get(BestStage(tc.s), tc.s.D); err != nil {
			t.Errorf("BestStage(%v): %v", tc.s, err)
		}
	}
}

// TestSupports: head dims without kernels and FP32 are ErrUnsupported.
func TestSupports(t *testing.T) {
	p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 4, Sk: 4, D: 96}, Precision: backend.FP8E4M3}
	if err := supports(p, 3); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("d=96: %v", err)
	}
	p.D = 64
	if err := supports(p, len(Stages)+1); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("stage past the list: %v", err)
	}
	p.Precision = backend.FP32
	if err := supports(p, 1); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("fp32: %v", err)
	}
}
