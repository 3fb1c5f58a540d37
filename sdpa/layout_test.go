package sdpa_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// bshd returns t ([B][H][S][D]) copied into [B][S][H][D].
func bshd(t *sdpa.Tensor) *sdpa.Tensor {
	return &sdpa.Tensor{Data: layout.Permute(t.Data, t.B, t.H, t.S, t.D, sdpa.BSHD), B: t.B, H: t.H, S: t.S, D: t.D, Layout: sdpa.BSHD}
}

// TestLayoutsThroughTheAPI: the same problem given in [B][S][H][D] returns
// the [B][H][S][D] result in [B][S][H][D] order, bit for bit (the same
// arithmetic, rows gathered): both precisions, every mask, GQA, accuracy
// options (all three at once), Into; and Quantize then Dequantize agree across layouts.
func TestLayoutsThroughTheAPI(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 61))
	q, k, v := randTensor(rng, 2, 4, 29, 64), randTensor(rng, 2, 2, 41, 64), randTensor(rng, 2, 2, 41, 64)
	qs, ks, vs := bshd(q), bshd(k), bshd(v)
	for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
		for _, m := range []sdpa.Mask{sdpa.NoMask, sdpa.CausalUpperLeft, sdpa.CausalLowerRight} {
			for _, smooth := range []bool{false, true} {
				opts := &sdpa.Options{Precision: prec, Mask: m, SmoothK: smooth, Hadamard: smooth, Backend: "cpu"}
				if smooth {
					opts.OutlierChannels = 3
				}
				name := fmt.Sprintf("%v/%v/options=%v", prec, m, smooth)
				want, wantLSE, err := sdpa.AttentionLSE(q, k, v, opts)
				if err != nil {
					t.Fatal(err)
				}
				got, lse, err := sdpa.AttentionLSE(qs, ks, vs, opts)
				if err != nil {
					t.Fatal(err)
				}
				if got.Layout != sdpa.BSHD {
					t.Fatalf("%s: result in layout %v", name, got.Layout)
				}
				if i := sameBits(got.Data, bshd(want).Data); i >= 0 {
					t.Fatalf("%s: element %d differs", name, i)
				}
				if i := sameBits(lse, wantLSE); i >= 0 {
					t.Fatalf("%s: LSE %d differs", name, i)
				}
				out, lse2 := poisoned(2, 4, 29, 64)
				out.Layout = sdpa.BSHD
				if err := sdpa.AttentionInto(out, lse2, qs, ks, vs, opts); err != nil || sameBits(out.Data, got.Data) >= 0 || sameBits(lse2, lse) >= 0 {
					t.Fatalf("%s: Into differs: %v", name, err)
				}
			}
		}
	}
	q8, err := sdpa.Quantize(q)
	if err != nil {
		t.Fatal(err)
	}
	q8s, err := sdpa.Quantize(qs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range q8.Scales {
		if s != q8s.Scales[i] {
			t.Fatalf("scale %d: %g in bhsd, %g in bshd", i, s, q8s.Scales[i])
		}
	}
	d, _ := q8.Dequantize()
	ds, _ := q8s.Dequantize()
	if ds.Layout != sdpa.BSHD || sameBits(ds.Data, bshd(d).Data) >= 0 {
		t.Fatal("dequantized tensors differ across layouts")
	}
	k8s, _ := sdpa.Quantize(ks)
	v8s, _ := sdpa.Quantize(vs)
	k8, _ := sdpa.Quantize(k)
	v8, _ := sdpa.Quantize(v)
	want, _, _ := sdpa.AttentionQuantized(q8, k8, v8, nil)
	got, _, err := sdpa.AttentionQuantized(q8s, k8s, v8s, nil)
	if err != nil || sameBits(got.Data, bshd(want).Data) >= 0 {
		t.Fatalf("AttentionQuantized differs across layouts: %v", err)
	}
}

// TestLayoutErrors: mixed layouts and unknown ones are errors.
func TestLayoutErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 62))
	q, k := randTensor(rng, 1, 2, 5, 16), randTensor(rng, 1, 2, 7, 16)
	if _, err := sdpa.Attention(q, bshd(k), k, nil); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("mixed layouts: %v", err)
	}
	bad := *q
	bad.Layout = 7
	if _, err := sdpa.Attention(&bad, k, k, nil); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("unknown layout: %v", err)
	}
	out, _ := poisoned(1, 2, 5, 16)
	out.Layout = sdpa.BSHD
	if err := sdpa.AttentionInto(out, nil, q, k, k, nil); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("output in another layout: %v", err)
	}
}
