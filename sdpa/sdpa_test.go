package sdpa_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/half"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

func randTensor(rng *rand.Rand, b, h, s, d int) *sdpa.Tensor {
	x := make([]float32, b*h*s*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	t, err := sdpa.NewTensor(x, b, h, s, d)
	if err != nil {
		panic(err)
	}
	return t
}

func TestErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 1))
	q, k, v := randTensor(rng, 2, 4, 8, 16), randTensor(rng, 2, 2, 10, 16), randTensor(rng, 2, 2, 10, 16)
	bad := func(mut func(t *sdpa.Tensor)) *sdpa.Tensor {
		c := *q
		mut(&c)
		return &c
	}
	cases := []struct {
		name    string
		q, k, v *sdpa.Tensor
		opts    *sdpa.Options
		want    error
		mention string
	}{
		{"nil q", nil, k, v, nil, sdpa.ErrInvalid, "q is nil"},
		{"nil v", q, k, nil, nil, sdpa.ErrInvalid, "v is nil"},
		{"short data", bad(func(t *sdpa.Tensor) { t.Data = t.Data[:10] }), k, v, nil, sdpa.ErrInvalid, "do not match"},
		{"negative size", bad(func(t *sdpa.Tensor) { t.S = -8; t.H = -4 }), k, v, nil, sdpa.ErrInvalid, "positive"},
		{"zero size", bad(func(t *sdpa.Tensor) { t.B = 0 }), k, v, nil, sdpa.ErrInvalid, "positive"},
		{"batch mismatch", randTensor(rng, 1, 4, 8, 16), k, v, nil, sdpa.ErrInvalid, "batch"},
		{"head dim mismatch", randTensor(rng, 2, 4, 8, 32), k, v, nil, sdpa.ErrInvalid, "head dims"},
		{"k v lengths differ", q, k, randTensor(rng, 2, 2, 11, 16), nil, sdpa.ErrInvalid, "must match"},
		{"heads not multiple", randTensor(rng, 2, 3, 8, 16), k, v, nil, sdpa.ErrInvalid, "multiple"},
		{"nan scale", q, k, v, &sdpa.Options{Scale: float32(math.NaN())}, sdpa.ErrInvalid, "scale"},
		{"inf scale", q, k, v, &sdpa.Options{Scale: float32(math.Inf(1))}, sdpa.ErrInvalid, "scale"},
		{"unknown backend", q, k, v, &sdpa.Options{Backend: "tpu"}, sdpa.ErrUnknownBackend, "tpu"},
		{"unknown mask", q, k, v, &sdpa.Options{Mask: 7}, sdpa.ErrInvalid, "mask"},
		{"unknown precision", q, k, v, &sdpa.Options{Precision: 9}, sdpa.ErrInvalid, "precision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, lse, err := sdpa.AttentionLSE(c.q, c.k, c.v, c.opts)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("got error %v, want %v mentioning %q", err, c.want, c.mention)
			}
			if out != nil || lse != nil {
				t.Fatal("output returned with an error")
			}
		})
	}
}

func TestQuantizedErrors(t *testing.T) {
	data := make([]fp8.E4M3, 2*3*4*8)
	if _, err := sdpa.NewQuantizedTensor(data, []float32{1, 2}, 2, 3, 4, 8); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("wrong scale count: %v", err)
	}
	if _, err := sdpa.NewQuantizedTensor(data, []float32{float32(math.NaN())}, 2, 3, 4, 8); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("NaN scale: %v", err)
	}
	if _, err := sdpa.NewQuantizedTensor(data, []float32{-1}, 2, 3, 4, 8); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("negative scale: %v", err)
	}
	q, err := sdpa.NewQuantizedTensor(data, []float32{0.5}, 2, 3, 4, 8)
	if err != nil || len(q.Scales) != 6 {
		t.Fatalf("single scale not expanded: %v", err)
	}
	if _, _, err := sdpa.AttentionQuantized(q, nil, q, nil); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("nil k: %v", err)
	}
}

// TestMatchesOracle: the default backend against the float64 oracle through
// the public API, every mask, FP32 and FP8E4M3.
func TestMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 2))
	for _, m := range []sdpa.Mask{sdpa.NoMask, sdpa.CausalUpperLeft, sdpa.CausalLowerRight} {
		for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
			q, k, v := randTensor(rng, 2, 4, 37, 64), randTensor(rng, 2, 2, 53, 64), randTensor(rng, 2, 2, 53, 64)
			out, lse, err := sdpa.AttentionLSE(q, k, v, &sdpa.Options{Mask: m, Precision: prec})
			if err != nil {
				t.Fatal(err)
			}
			p := &backend.Problem{Shape: backend.Shape{B: 2, Hq: 4, Hkv: 2, Sq: 37, Sk: 53, D: 64}, Scale: 0.125, Mask: m, Precision: prec}
			if prec == sdpa.FP32 {
				p.Q, p.K, p.V = q.Data, k.Data, v.Data
			} else {
				for _, x := range []struct {
					t *sdpa.Tensor
					c *[]fp8.E4M3
					s *[]float32
				}{{q, &p.Q8, &p.QScale}, {k, &p.K8, &p.KScale}, {v, &p.V8, &p.VScale}} {
					*x.c, *x.s, _ = fp8.QuantizeE4M3(x.t.Data, x.t.S*x.t.D)
				}
			}
			want, wantLSE := oracle.Naive(p)
			// The tolerance of the backend the call ran on: the cpu's float32
			// tier, or on a GPU host built with -tags cuda the kernels' (P
			// in float16 or E4M3, scores on FP8 tensor cores).
			p.Out = make([]float32, len(out.Data))
			be, err := backend.Select("", p)
			if err != nil {
				t.Fatal(err)
			}
			tol, ltol := sdpatest.ToleranceFor(be.Name())(p), sdpatest.FP32Tolerance(p)
			if strings.HasPrefix(be.Name(), "cuda") {
				ltol = sdpatest.FP8MMALSETolerance(p)
			}
			if st := sdpatest.Compare(out.Data, want, tol); st.Beyond > 0 {
				t.Errorf("%v %v on %s: %d outputs beyond tolerance, max err %g", m, prec, be.Name(), st.Beyond, st.MaxErr)
			}
			if st := sdpatest.Compare(lse, wantLSE, ltol); st.Beyond > 0 {
				t.Errorf("%v %v on %s: %d LSE beyond tolerance", m, prec, be.Name(), st.Beyond)
			}
		}
	}
}

// TestFP8Accuracy: on N(0,1) inputs the FP8 path's relative L2 error to the
// float64 result on the unquantized inputs is no worse than 1.3x the error
// that per-tensor input quantization alone causes.
func TestFP8Accuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 3))
	for _, m := range []sdpa.Mask{sdpa.NoMask, sdpa.CausalLowerRight} {
		q, k, v := randTensor(rng, 2, 8, 128, 64), randTensor(rng, 2, 8, 128, 64), randTensor(rng, 2, 8, 128, 64)
		exact, _, err := sdpa.AttentionLSE(q, k, v, &sdpa.Options{Mask: m, Backend: "reference"})
		if err != nil {
			t.Fatal(err)
		}
		fp8Out, err := sdpa.Attention(q, k, v, &sdpa.Options{Mask: m, Precision: sdpa.FP8E4M3})
		if err != nil {
			t.Fatal(err)
		}
		// Per-tensor quantization alone: one scale for the whole tensor,
		// then exact (float64) attention on the dequantized values.
		perTensor := func(x *sdpa.Tensor) *sdpa.Tensor {
			c, s, _ := fp8.QuantizeE4M3(x.Data, len(x.Data))
			qt, err := sdpa.NewQuantizedTensor(c, s, x.B, x.H, x.S, x.D)
			if err != nil {
				t.Fatal(err)
			}
			deq, err := qt.Dequantize()
			if err != nil {
				t.Fatal(err)
			}
			return deq
		}
		quantOnly, err := sdpa.Attention(perTensor(q), perTensor(k), perTensor(v), &sdpa.Options{Mask: m, Backend: "reference"})
		if err != nil {
			t.Fatal(err)
		}
		inf := sdpatest.Tolerance{Atol: math.Inf(1)}
		ours := sdpatest.Compare(fp8Out.Data, exact.Data, inf).RelL2
		base := sdpatest.Compare(quantOnly.Data, exact.Data, inf).RelL2
		t.Logf("%v: relative L2 error %.4g (per-tensor quantization alone: %.4g, ratio %.3f)", m, ours, base, ours/base)
		if !(ours <= 1.3*base) || base == 0 {
			t.Errorf("%v: FP8 error %.4g exceeds 1.3 x %.4g", m, ours, base)
		}
	}
}

// TestQuantizedEqualsFP8: passing pre-quantized tensors gives exactly what
// FP8E4M3 on the float32 tensors gives, bit for bit, output and LSE: the same
// quantization and the same kernels, although the backends quantize the
// float32 call's inputs on read (backend.Problem.QuantizeOnRead: the cpu
// backend rounds each element to its code's value, the cuda backend
// encodes them into its page-locked ring, scales included)
// and are handed the quantized call's
// codes; on "cuda" the float32 call's output comes down in float16, so
// the quantized call's is rounded as it is (half.Round at half.Scale of
// V's scales). The cases reach every path that reads inputs: dense blocks,
// GQA-packed blocks (Sq < 64), the BSHD layout, both causal masks; on
// "cuda" (GPU builds) those of its head dims.
func TestQuantizedEqualsFP8(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 4))
	for _, be := range []string{"cpu", "cuda"} {
		if _, err := sdpa.Open(be); err != nil {
			t.Logf("%s: %v", be, err)
			continue
		}
		for _, tc := range []struct {
			name                  string
			b, hq, hkv, sq, sk, d int
			mask                  sdpa.Mask
			layout                sdpa.Layout
		}{
			{"packed-causal", 1, 4, 1, 20, 30, 32, sdpa.CausalUpperLeft, sdpa.BHSD},
			{"packed-bshd", 2, 6, 2, 3, 70, 16, sdpa.CausalLowerRight, sdpa.BSHD},
			{"dense", 2, 2, 2, 80, 100, 32, sdpa.NoMask, sdpa.BHSD},
			{"dense-gqa-causal", 1, 4, 2, 96, 96, 64, sdpa.CausalLowerRight, sdpa.BHSD},
			{"dense-bshd", 1, 3, 3, 70, 65, 8, sdpa.CausalUpperLeft, sdpa.BSHD},
			{"d128-bshd", 2, 4, 2, 33, 75, 128, sdpa.CausalLowerRight, sdpa.BSHD},
			{"d64", 2, 8, 8, 256, 256, 64, sdpa.NoMask, sdpa.BHSD},
		} {
			t.Run(be+"/"+tc.name, func(t *testing.T) {
				q := randLayout(rng, tc.b, tc.hq, tc.sq, tc.d, tc.layout)
				k := randLayout(rng, tc.b, tc.hkv, tc.sk, tc.d, tc.layout)
				v := randLayout(rng, tc.b, tc.hkv, tc.sk, tc.d, tc.layout)
				opts := &sdpa.Options{Mask: tc.mask, Precision: sdpa.FP8E4M3, Backend: be}
				a, alse, err := sdpa.AttentionLSE(q, k, v, opts)
				if errors.Is(err, sdpa.ErrUnsupported) {
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				q8, _ := sdpa.Quantize(q)
				k8, _ := sdpa.Quantize(k)
				v8, _ := sdpa.Quantize(v)
				b, blse, err := sdpa.AttentionQuantized(q8, k8, v8, opts)
				if err != nil {
					t.Fatal(err)
				}
				if be == "cuda" {
					half.RoundOutput(b.Data, v8.Scales)
				}
				for i := range a.Data {
					if math.Float32bits(a.Data[i]) != math.Float32bits(b.Data[i]) || a.Data[i] != a.Data[i] {
						t.Fatalf("element %d: %g from float32 inputs, %g from quantized ones", i, a.Data[i], b.Data[i])
					}
				}
				for i := range alse {
					if math.Float32bits(alse[i]) != math.Float32bits(blse[i]) {
						t.Fatalf("lse %d: %g from float32 inputs, %g from quantized ones", i, alse[i], blse[i])
					}
				}
			})
		}
	}
}

// TestEmptyRows: lower-right causal with Sq > Sk leaves the first rows with
// no key: zeros and LSE -Inf.
func TestEmptyRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 5))
	q, k := randTensor(rng, 1, 1, 6, 8), randTensor(rng, 1, 1, 2, 8)
	for _, be := range []string{"cpu", "reference"} {
		out, lse, err := sdpa.AttentionLSE(q, k, k, &sdpa.Options{Mask: sdpa.CausalLowerRight, Backend: be})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			empty := i < 4 // row i sees keys j <= i + 2 - 6
			if empty != math.IsInf(float64(lse[i]), -1) {
				t.Errorf("%s row %d: lse %g", be, i, lse[i])
			}
			for d := 0; empty && d < 8; d++ {
				if out.Data[i*8+d] != 0 {
					t.Errorf("%s row %d: output %g, want 0", be, i, out.Data[i*8+d])
				}
			}
		}
	}
}

func TestBackends(t *testing.T) {
	names := sdpa.Backends()
	if len(names) < 2 || names[len(names)-1] != "reference" {
		t.Fatalf("backends %v", names)
	}
	// Without -tags cuda, naming the GPU backend says how to get it.
	rng := rand.New(rand.NewPCG(1, 1))
	q := randTensor(rng, 1, 1, 4, 64)
	_, err := sdpa.Attention(q, q, q, &sdpa.Options{Backend: "cuda", Precision: sdpa.FP8E4M3})
	if err != nil && !strings.Contains(err.Error(), "-tags cuda") && !strings.Contains(err.Error(), "CUDA") {
		t.Errorf("cuda backend error does not explain itself: %v", err)
	}
}

func FuzzAttention(f *testing.F) {
	f.Add(uint8(1), uint8(2), uint8(1), uint8(3), uint8(4), uint8(8), uint8(0), uint8(0), float32(0), uint64(1))
	f.Fuzz(func(t *testing.T, b, hq, hkv, sq, sk, d, mask, prec uint8, scale float32, seed uint64) {
		// Sizes within [-2, 13]: negative and zero included, to hit the
		// error paths; data lengths follow the (possibly invalid) shape.
		dim := func(x uint8) int { return int(x%16) - 2 }
		B, Hq, Hkv, Sq, Sk, D := dim(b), dim(hq), dim(hkv), dim(sq), dim(sk), dim(d)
		rng := rand.New(rand.NewPCG(seed, 7))
		mk := func(bb, h, s, dd int) *sdpa.Tensor {
			n := max(0, bb*h*s*dd)
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			return &sdpa.Tensor{Data: x, B: bb, H: h, S: s, D: dd}
		}
		q, k, v := mk(B, Hq, Sq, D), mk(B, Hkv, Sk, D), mk(B, Hkv, Sk, D)
		opts := &sdpa.Options{Scale: scale, Mask: sdpa.Mask(mask % 4), Precision: sdpa.Precision(prec % 3)}
		out, lse, err := sdpa.AttentionLSE(q, k, v, opts)
		if err != nil {
			if out != nil || lse != nil {
				t.Fatal("output with error")
			}
			return
		}
		if len(out.Data) != B*Hq*Sq*D || len(lse) != B*Hq*Sq {
			t.Fatalf("output sizes %d %d", len(out.Data), len(lse))
		}
	})
}
