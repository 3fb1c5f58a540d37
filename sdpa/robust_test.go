package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpa"
)

// noPanic runs fn and turns a panic into a test failure naming the call.
func noPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	fn()
}

// wantInvalid fails unless err wraps ErrInvalid.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("%s: got %v, want an error wrapping ErrInvalid", what, err)
	}
}

// TestExportedFunctionsNeverPanic drives every exported function of sdpa
// with inconsistent literals and extreme sizes: each must return an error
// (or, where documented, a defined result), never panic.
func TestExportedFunctionsNeverPanic(t *testing.T) {
	huge := []struct{ b, h, s, d int }{
		{1 << 32, 1 << 32, 1, 1},            // product wraps to 0
		{1 << 31, 1 << 31, 4, 1},            // product wraps to 0
		{math.MaxInt, 2, 1, 1},              // wraps negative
		{math.MaxInt, math.MaxInt, 1, 1},    // wraps to 1
		{1, 1, 1, math.MaxInt},              // fits, but no data
		{3, 1 << 62, 1, 1},                  // wraps
		{-1, -1, 1, 1},                      // negative product is positive
		{0, 5, 5, 5},                        // zero size
		{math.MinInt, math.MinInt, 1, 1},    // wraps to 0
		{1 << 21, 1 << 21, 1 << 21, 1 << 1}, // 2^64: wraps to 0
	}
	small := &sdpa.Tensor{Data: make([]float32, 8), B: 1, H: 1, S: 1, D: 8}
	for _, sh := range huge {
		name := fmt.Sprintf("[%d][%d][%d][%d]", sh.b, sh.h, sh.s, sh.d)
		noPanic(t, "NewTensor"+name, func() {
			_, err := sdpa.NewTensor(nil, sh.b, sh.h, sh.s, sh.d)
			wantInvalid(t, "NewTensor"+name, err)
		})
		lit := &sdpa.Tensor{B: sh.b, H: sh.h, S: sh.s, D: sh.d}
		for _, call := range []struct {
			name string
			q, k *sdpa.Tensor
		}{{"q", lit, small}, {"k", small, lit}} {
			for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
				what := fmt.Sprintf("Attention(%s=%s, %v)", call.name, name, prec)
				noPanic(t, what, func() {
					out, lse, err := sdpa.AttentionLSE(call.q, call.k, call.k, &sdpa.Options{Precision: prec})
					wantInvalid(t, what, err)
					if out != nil || lse != nil {
						t.Errorf("%s: output with an error", what)
					}
				})
			}
		}
		noPanic(t, "Quantize"+name, func() {
			_, err := sdpa.Quantize(lit)
			wantInvalid(t, "Quantize"+name, err)
		})
		for _, scales := range [][]float32{{1}, nil, {1, 2}} {
			what := fmt.Sprintf("NewQuantizedTensor%s with %d scales", name, len(scales))
			noPanic(t, what, func() {
				_, err := sdpa.NewQuantizedTensor(nil, scales, sh.b, sh.h, sh.s, sh.d)
				wantInvalid(t, what, err)
			})
		}
		qlit := &sdpa.QuantizedTensor{B: sh.b, H: sh.h, S: sh.s, D: sh.d, Scales: []float32{1}}
		noPanic(t, "Dequantize"+name, func() {
			_, err := qlit.Dequantize()
			wantInvalid(t, "Dequantize"+name, err)
		})
		noPanic(t, "AttentionQuantized"+name, func() {
			_, _, err := sdpa.AttentionQuantized(qlit, qlit, qlit, nil)
			wantInvalid(t, "AttentionQuantized"+name, err)
		})
	}

	// Inconsistent quantized literals.
	good := func() *sdpa.QuantizedTensor {
		return &sdpa.QuantizedTensor{Data: make([]fp8.E4M3, 2*3*4*8), Scales: []float32{1, 1, 1, 1, 1, 1}, B: 2, H: 3, S: 4, D: 8}
	}
	for _, c := range []struct {
		name string
		mut  func(*sdpa.QuantizedTensor)
	}{
		{"short data", func(q *sdpa.QuantizedTensor) { q.Data = q.Data[:10] }},
		{"long data", func(q *sdpa.QuantizedTensor) { q.Data = append(q.Data, 0) }},
		{"no scales", func(q *sdpa.QuantizedTensor) { q.Scales = nil }},
		{"too few scales", func(q *sdpa.QuantizedTensor) { q.Scales = q.Scales[:5] }},
		{"NaN scale", func(q *sdpa.QuantizedTensor) { q.Scales[2] = float32(math.NaN()) }},
		{"Inf scale", func(q *sdpa.QuantizedTensor) { q.Scales[2] = float32(math.Inf(1)) }},
		{"zero scale", func(q *sdpa.QuantizedTensor) { q.Scales[0] = 0 }},
		{"negative size", func(q *sdpa.QuantizedTensor) { q.S, q.D = -4, -8 }},
	} {
		noPanic(t, "Dequantize "+c.name, func() {
			q := good()
			c.mut(q)
			out, err := q.Dequantize()
			wantInvalid(t, "Dequantize "+c.name, err)
			if out != nil {
				t.Errorf("Dequantize %s: output with an error", c.name)
			}
		})
		noPanic(t, "AttentionQuantized "+c.name, func() {
			q := good()
			c.mut(q)
			_, _, err := sdpa.AttentionQuantized(good(), q, good(), nil)
			wantInvalid(t, "AttentionQuantized "+c.name, err)
		})
	}
	var nilQ *sdpa.QuantizedTensor
	noPanic(t, "Dequantize(nil)", func() {
		_, err := nilQ.Dequantize()
		wantInvalid(t, "Dequantize(nil)", err)
	})
	noPanic(t, "Quantize(nil)", func() {
		_, err := sdpa.Quantize(nil)
		wantInvalid(t, "Quantize(nil)", err)
	})
	noPanic(t, "Backends", func() {
		if len(sdpa.Backends()) == 0 {
			t.Error("no backends")
		}
	})
}

// TestScoreFactorOverflow: a scale times Q and K descales so large that
// scores could overflow float32 is rejected with an error that names the
// values; a scale near the float32 limit with inputs that keep the product
// small is computed, on every backend, and finite.
func TestScoreFactorOverflow(t *testing.T) {
	mk := func(v float32) *sdpa.Tensor {
		x := make([]float32, 2*4*16)
		for i := range x {
			x[i] = v * float32(1+i%7) / 7
		}
		tt, _ := sdpa.NewTensor(x, 1, 2, 4, 16)
		return tt
	}
	big := mk(1e20) // descale 1e20/448 for Q and K: factor ~1.2e34
	_, err := sdpa.Attention(big, big, big, &sdpa.Options{Precision: sdpa.FP8E4M3})
	wantInvalid(t, "huge descales", err)
	if err != nil && !strings.Contains(err.Error(), "overflow") {
		t.Errorf("error does not say why: %v", err)
	}
	// Scale 3e38 times log2(e) overflows float32 on its own; with inputs of
	// 1e-19 the factor 3e38·(1e-19/448)² is about 1.5e-1.
	tiny := mk(1e-19)
	for _, be := range []string{"cpu", "reference"} {
		out, lse, err := sdpa.AttentionLSE(tiny, tiny, tiny, &sdpa.Options{Precision: sdpa.FP8E4M3, Scale: 3e38, Backend: be})
		if err != nil {
			t.Fatalf("%s: %v", be, err)
		}
		for i, x := range append(out.Data, lse...) {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s: element %d is %v", be, i, x)
			}
		}
	}
}

// FuzzShapes: any four sizes, near the int limits included, through every
// constructor and the attention entry points with literals of that shape:
// errors, never panics, and no output with an error.
func FuzzShapes(f *testing.F) {
	f.Add(int64(1<<32), int64(1<<32), int64(1), int64(1), uint8(0))
	f.Add(int64(math.MaxInt64), int64(2), int64(1), int64(1), uint8(1))
	f.Add(int64(1<<50), int64(1), int64(1), int64(1), uint8(3))
	f.Add(int64(-3), int64(-5), int64(2), int64(2), uint8(2))
	f.Fuzz(func(t *testing.T, b, h, s, d int64, which uint8) {
		B, H, S, D := int(b), int(h), int(s), int(d)
		noPanic(t, "NewTensor", func() {
			if tt, err := sdpa.NewTensor(make([]float32, 16), B, H, S, D); err == nil && B*H*S*D != 16 {
				t.Fatalf("NewTensor accepted %v for 16 elements", tt)
			}
		})
		noPanic(t, "NewQuantizedTensor", func() {
			_, _ = sdpa.NewQuantizedTensor(make([]fp8.E4M3, 16), []float32{1}, B, H, S, D)
		})
		lit := &sdpa.Tensor{Data: make([]float32, 16), B: B, H: H, S: S, D: D}
		ok := &sdpa.Tensor{Data: make([]float32, 16), B: 1, H: 1, S: 2, D: 8}
		args := [3]*sdpa.Tensor{ok, ok, ok}
		args[which%3] = lit
		for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
			noPanic(t, "AttentionLSE", func() {
				out, lse, err := sdpa.AttentionLSE(args[0], args[1], args[2], &sdpa.Options{Precision: prec})
				if err != nil && (out != nil || lse != nil) {
					t.Fatal("output with an error")
				}
			})
		}
		qlit := &sdpa.QuantizedTensor{Data: make([]fp8.E4M3, 16), Scales: []float32{1}, B: B, H: H, S: S, D: D}
		noPanic(t, "Dequantize", func() { _, _ = qlit.Dequantize() })
		noPanic(t, "AttentionQuantized", func() { _, _, _ = sdpa.AttentionQuantized(qlit, qlit, qlit, nil) })
	})
}
