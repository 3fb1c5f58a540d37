package cpu_test

import (
	"fmt"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestConformance runs the shared suite on every kernel set this CPU runs,
// both precisions, on one worker and on three.
func TestConformance(t *testing.T) {
	for _, isa := range cpu.ISAs() {
		for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
			for _, workers := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%v/workers=%d", isa, prec, workers), func(t *testing.T) {
					be, err := cpu.NewISA(workers, isa)
					if err != nil {
						t.Fatal(err)
					}
					sdpatest.Run(t, sdpatest.Config{Backend: be, Precision: prec, Tol: sdpatest.FP32Tolerance})
				})
			}
		}
	}
}

// TestQueryBlock: 64 rows per item unless that starves the workers.
func TestQueryBlock(t *testing.T) {
	for _, tc := range []struct {
		s       backend.Shape
		workers int
		want    int
	}{
		{sdpatest.NamedShapes["mission"], 1, 64},
		{sdpatest.NamedShapes["mission"], 8, 64},
		{sdpatest.NamedShapes["mission"], 16, 32},
		{sdpatest.NamedShapes["mission"], 32, 16},
		{sdpatest.NamedShapes["long"], 16, 64},
		{sdpatest.NamedShapes["small"], 2, 16},
		{sdpatest.NamedShapes["small"], 16, 16},
	} {
		if got := cpu.QueryBlock(tc.s, tc.workers); got != tc.want {
			t.Errorf("QueryBlock(%v, %d) = %d, want %d", tc.s, tc.workers, got, tc.want)
		}
	}
}
