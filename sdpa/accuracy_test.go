package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestAccuracyOptionsInvariant: SmoothK, Hadamard and OutlierChannels change
// nothing in exact arithmetic. In FP32 on the CPU, the output and the (corrected) LSE stay
// within twice the float32 tolerances of the float64 oracle on the
// untransformed inputs (twice: smoothing can double a key's norm, and M with
// it), for every mask (empty rows included), GQA, and head dims whose
// Hadamard blocks are 64, 32 and 16.
func TestAccuracyOptionsInvariant(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 21))
	shapes := []backend.Shape{
		{B: 2, Hq: 4, Hkv: 2, Sq: 37, Sk: 53, D: 64},
		{B: 1, Hq: 3, Hkv: 1, Sq: 40, Sk: 20, D: 96},
		{B: 1, Hq: 2, Hkv: 2, Sq: 9, Sk: 70, D: 80},
	}
	for _, s := range shapes {
		for _, m := range []sdpa.Mask{sdpa.NoMask, sdpa.CausalUpperLeft, sdpa.CausalLowerRight} {
			for _, o := range []sdpa.Options{{SmoothK: true}, {Hadamard: true}, {SmoothK: true, Hadamard: true},
				{OutlierChannels: 4}, {OutlierChannels: s.D}, {SmoothK: true, Hadamard: true, OutlierChannels: 5}} {
				name := fmt.Sprintf("%+v/%v/smooth=%v,hadamard=%v,outliers=%d", s, m, o.SmoothK, o.Hadamard, o.OutlierChannels)
				q, k, v := randTensor(rng, s.B, s.Hq, s.Sq, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D)
				for i := range k.Data { // a common offset on every channel: smoothing removes it
					k.Data[i] += float32(i%s.D) / 8
				}
				keep := append([]float32(nil), k.Data...)
				o.Mask, o.Backend = m, "cpu"
				out, lse, err := sdpa.AttentionLSE(q, k, v, &o)
				if err != nil {
					t.Fatal(err)
				}
				for i := range keep {
					if keep[i] != k.Data[i] {
						t.Fatalf("%s: the caller's K was changed", name)
					}
				}
				if err := closeToOracle(out.Data, lse, q, k, v, m); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

// closeToOracle compares an FP32 result with the float64 oracle on q, k, v
// under twice FP32Tolerance and LSETolerance.
func closeToOracle(out, lse []float32, q, k, v *sdpa.Tensor, m sdpa.Mask) error {
	p := &backend.Problem{Shape: backend.Shape{B: q.B, Hq: q.H, Hkv: k.H, Sq: q.S, Sk: k.S, D: q.D},
		Scale: float32(1 / math.Sqrt(float64(q.D))), Mask: m, Q: q.Data, K: k.Data, V: v.Data}
	want, wantLSE := oracle.Naive(p)
	tol, ltol := sdpatest.FP32Tolerance(p), sdpatest.LSETolerance(p)
	tol.Atol, tol.Rtol, ltol.Atol, ltol.Rtol = 2*tol.Atol, 2*tol.Rtol, 2*ltol.Atol, 2*ltol.Rtol
	if st := sdpatest.Compare(out, want, tol); st.Beyond > 0 {
		return fmt.Errorf("Out: %d beyond 2x %s (max %.3g)", st.Beyond, tol.Why, st.MaxErr)
	}
	if st := sdpatest.Compare(lse, wantLSE, ltol); st.Beyond > 0 {
		return fmt.Errorf("LSE: %d beyond 2x %s (max %.3g; first %d: %g, want %g)", st.Beyond, ltol.Why, st.MaxErr, st.FirstBad, lse[st.FirstBad], wantLSE[st.FirstBad])
	}
	return nil
}

// TestAccuracyOptionsErrors: the options transform float32 inputs; with
// already-quantized ones they are an error.
func TestAccuracyOptionsErrors(t *testing.T) {
	data := make([]fp8.E4M3, 1*2*4*8)
	qt, err := sdpa.NewQuantizedTensor(data, []float32{1}, 1, 2, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []sdpa.Options{{SmoothK: true}, {Hadamard: true}, {OutlierChannels: 1}} {
		if _, _, err := sdpa.AttentionQuantized(qt, qt, qt, &o); !errors.Is(err, sdpa.ErrInvalid) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	x := &sdpa.Tensor{Data: make([]float32, 1*2*4*8), B: 1, H: 2, S: 4, D: 8}
	for _, n := range []int{-1, 9, math.MinInt, math.MaxInt} {
		out := &sdpa.Tensor{Data: make([]float32, len(x.Data)), B: 1, H: 2, S: 4, D: 8}
		for i := range out.Data {
			out.Data[i] = math.Float32frombits(sdpatest.Poison)
		}
		err := sdpa.AttentionInto(out, nil, x, x, x, &sdpa.Options{OutlierChannels: n})
		if !errors.Is(err, sdpa.ErrInvalid) {
			t.Errorf("OutlierChannels %d: %v", n, err)
		}
		for _, y := range out.Data {
			if math.Float32bits(y) != sdpatest.Poison {
				t.Fatalf("OutlierChannels %d: output written before the error", n)
			}
		}
	}
}

// outliers returns N(0,1) tensors of shape B2 H8 S128 D64 with, for kind
// "scale", K channels 3, 17, 40, 41 twenty times larger and V channel 9
// eight times; for "offset", those K channels 20 + N(0,1) (a common offset,
// as outlier channels of real keys carry) and V channel 9 eight times.
func outliers(rng *rand.Rand, kind string) (q, k, v *sdpa.Tensor) {
	q, k, v = randTensor(rng, 2, 8, 128, 64), randTensor(rng, 2, 8, 128, 64), randTensor(rng, 2, 8, 128, 64)
	if kind == "normal" {
		return
	}
	for i := range k.Data {
		switch c := i % 64; {
		case c == 3 || c == 17 || c == 40 || c == 41:
			if kind == "scale" {
				k.Data[i] *= 20
			} else {
				k.Data[i] += 20
			}
		}
		if i%64 == 9 {
			v.Data[i] *= 8
		}
	}
	return
}

// TestAccuracyOptionsFP8 measures the FP8E4M3 path's relative L2 error
// against float64 attention on the unquantized inputs, divided by the error
// of per-tensor quantization alone (exact attention on inputs quantized with
// one scale per tensor), on N(0,1) inputs and on the two outlier kinds, with
// each option. It asserts the bounds docs/ACCURACY.md records: K smoothing
// at most 0.5x on offset outliers; no option above 1.3x on N(0,1) inputs.
func TestAccuracyOptionsFP8(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 22))
	inf := sdpatest.Tolerance{Atol: math.Inf(1)}
	perTensor := func(x *sdpa.Tensor) *sdpa.Tensor {
		c, s, _ := fp8.QuantizeE4M3(x.Data, len(x.Data))
		qt, _ := sdpa.NewQuantizedTensor(c, s, x.B, x.H, x.S, x.D)
		d, err := qt.Dequantize()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, kind := range []string{"normal", "scale", "offset"} {
		q, k, v := outliers(rng, kind)
		exact, err := sdpa.Attention(q, k, v, &sdpa.Options{Backend: "reference"})
		if err != nil {
			t.Fatal(err)
		}
		base, err := sdpa.Attention(perTensor(q), perTensor(k), perTensor(v), &sdpa.Options{Backend: "reference"})
		if err != nil {
			t.Fatal(err)
		}
		baseErr := sdpatest.Compare(base.Data, exact.Data, inf).RelL2
		for _, o := range []sdpa.Options{{}, {SmoothK: true}, {Hadamard: true}, {SmoothK: true, Hadamard: true},
			{OutlierChannels: 4}, {SmoothK: true, OutlierChannels: 4}} {
			o.Precision = sdpa.FP8E4M3
			out, err := sdpa.Attention(q, k, v, &o)
			if err != nil {
				t.Fatal(err)
			}
			ratio := sdpatest.Compare(out.Data, exact.Data, inf).RelL2 / baseErr
			t.Logf("%-6s inputs, smooth=%-5v hadamard=%-5v outliers=%d: %.3fx per-tensor quantization's error (%.4g)", kind, o.SmoothK, o.Hadamard, o.OutlierChannels, ratio, baseErr)
			switch {
			case !(ratio <= 1.3) && kind == "normal":
				t.Errorf("%s inputs %+v: %.3fx exceeds 1.3x", kind, o, ratio)
			case !(ratio <= 0.5) && kind == "offset" && o.SmoothK:
				t.Errorf("%s inputs %+v: %.3fx exceeds 0.5x", kind, o, ratio)
			case !(ratio <= 0.5) && kind == "scale" && o.OutlierChannels > 0:
				t.Errorf("%s inputs %+v: %.3fx exceeds 0.5x", kind, o, ratio)
			}
		}
	}
}

// TestInvarianceCatchesBrokenTransforms: closeToOracle, the invariance
// test's check, fails smoothing without the LSE correction and a Hadamard
// transform whose signs differ between Q and K.
func TestInvarianceCatchesBrokenTransforms(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 23))
	s := backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 20, Sk: 30, D: 64}
	q, k, v := randTensor(rng, s.B, s.Hq, s.Sq, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D)
	for i := range k.Data {
		k.Data[i] += 1 + float32(i%s.D)/16
	}
	copyT := func(x *sdpa.Tensor) *sdpa.Tensor {
		c := *x
		c.Data = append([]float32(nil), x.Data...)
		return &c
	}
	run := func(q2, k2 *sdpa.Tensor) error {
		out, lse, err := sdpa.AttentionLSE(q2, k2, v, &sdpa.Options{Backend: "cpu", Mask: sdpa.CausalUpperLeft})
		if err != nil {
			t.Fatal(err)
		}
		return closeToOracle(out.Data, lse, q, k, v, sdpa.CausalUpperLeft)
	}
	k2 := copyT(k)
	sdpa.SmoothKForTest(k2, make([]float64, s.D))
	if err := run(q, k2); err == nil {
		t.Error("smoothing without the LSE correction passed")
	} else {
		t.Logf("no LSE correction: %v", err)
	}
	q2, k3 := copyT(q), copyT(k)
	a, b := make([]float32, s.D), make([]float32, s.D)
	for i := range a {
		a[i], b[i] = 1, 1
	}
	b[5] = -1
	sdpa.RotateRowsForTest(q2.Data, a, 64)
	sdpa.RotateRowsForTest(k3.Data, b, 64)
	if err := run(q2, k3); err == nil {
		t.Error("different signs for Q and K passed")
	} else {
		t.Logf("mismatched signs: %v", err)
	}
	k4 := copyT(k) // the same transform on both passes
	sdpa.RotateRowsForTest(k4.Data, a, 64)
	if err := run(q2, k4); err != nil {
		t.Errorf("matching transforms failed: %v", err)
	}

	// The outlier split with one of its four products wrong, then right.
	split := func(row func(dst []float32, d, i int, query bool)) func(dst, src []float32, chans []int, scale float32, query bool) {
		return func(dst, src []float32, chans []int, scale float32, query bool) {
			sdpa.SplitRowForTest(dst, src, chans, scale, query)
			for i := range chans {
				row(dst, len(src), i, query)
			}
		}
	}
	defer sdpa.SetSplitRowForTest(nil)
	for _, c := range []struct {
		name   string
		broken func(dst []float32, d, i int, query bool)
	}{
		{"lo·lo dropped", func(dst []float32, d, i int, query bool) {
			if query {
				dst[d+3*i+2] = 0
			}
		}},
		{"key extras in the query's order", func(dst []float32, d, i int, query bool) {
			if !query {
				e := dst[d+3*i : d+3*i+3]
				e[0], e[1] = e[1], e[0]
			}
		}},
	} {
		sdpa.SetSplitRowForTest(split(c.broken))
		out, lse, err := sdpa.AttentionLSE(q, k, v, &sdpa.Options{Backend: "cpu", Mask: sdpa.CausalUpperLeft, OutlierChannels: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := closeToOracle(out.Data, lse, q, k, v, sdpa.CausalUpperLeft); err == nil {
			t.Errorf("outlier split, %s: passed", c.name)
		} else {
			t.Logf("outlier split, %s: %v", c.name, err)
		}
	}
	sdpa.SetSplitRowForTest(nil)
	out, lse, err := sdpa.AttentionLSE(q, k, v, &sdpa.Options{Backend: "cpu", Mask: sdpa.CausalUpperLeft, OutlierChannels: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := closeToOracle(out.Data, lse, q, k, v, sdpa.CausalUpperLeft); err != nil {
		t.Errorf("outlier split: %v", err)
	}
}
