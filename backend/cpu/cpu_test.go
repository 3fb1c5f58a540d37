package cpu_test

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/sdpatest"
)

func TestConformance(t *testing.T) {
	for _, prec := range []backend.Precision{backend.FP32, backend.FP8E4M3} {
		for _, workers := range []int{1, 3} {
			t.Run(prec.String(), func(t *testing.T) {
				sdpatest.Run(t, sdpatest.Config{Backend: cpu.New(workers), Precision: prec, Tol: sdpatest.FP32Tolerance})
			})
		}
	}
}
