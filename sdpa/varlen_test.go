package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/internal/allocs"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// packed returns n random rows of h heads in [1][h][n][d] BSHD order.
func packed(rng *rand.Rand, h, n, d int) *sdpa.Tensor {
	x := make([]float32, h*n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return &sdpa.Tensor{Data: x, B: 1, H: h, S: n, D: d, Layout: sdpa.BSHD}
}

// sequence returns rows s0..s1 of a packed tensor as a [1][h][s1-s0][d]
// BHSD tensor of its own.
func sequence(t *sdpa.Tensor, s0, s1 int) *sdpa.Tensor {
	x := make([]float32, t.H*(s1-s0)*t.D)
	for s := s0; s < s1; s++ {
		for h := 0; h < t.H; h++ {
			copy(x[(h*(s1-s0)+s-s0)*t.D:][:t.D], t.Data[(s*t.H+h)*t.D:][:t.D])
		}
	}
	return &sdpa.Tensor{Data: x, B: 1, H: t.H, S: s1 - s0, D: t.D}
}

// TestVarlenEqualsSeparateCalls: each sequence of a packed varlen call gets
// exactly what a separate call on its own tensors returns (output and LSE,
// bit for bit), with sequences of 0 and 1 queries, 0 keys, GQA, every mask
// and both precisions; a sequence with queries and no keys gets zeros and
// LSE -Inf.
func TestVarlenEqualsSeparateCalls(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 71))
	const hq, hkv, d = 4, 2, 64
	for trial := range 12 {
		n := 1 + rng.IntN(5)
		cuQ, cuK := []int{0}, []int{0}
		for i := range n {
			lq, lk := rng.IntN(40), rng.IntN(70)
			switch (trial + i) % 5 {
			case 0:
				lq = 1 // decode
			case 1:
				lk = 0 // no history
			case 2:
				lq = 0
			}
			if i == n-1 { // tensors have positive sizes: at least one query and one key in all
				lq, lk = max(lq, 1-cuQ[i]), max(lk, 1-cuK[i])
			}
			cuQ, cuK = append(cuQ, cuQ[i]+lq), append(cuK, cuK[i]+lk)
		}
		q, k, v := packed(rng, hq, cuQ[n], d), packed(rng, hkv, cuK[n], d), packed(rng, hkv, cuK[n], d)
		opts := &sdpa.Options{Precision: sdpa.Precision(trial % 2), Mask: sdpa.Mask(trial % 3), Backend: "cpu"}
		name := fmt.Sprintf("trial %d %v %v cuQ %v cuK %v", trial, opts.Precision, opts.Mask, cuQ, cuK)
		out := packed(rng, hq, cuQ[n], d) // garbage: every row must be written
		lse := make([]float32, hq*cuQ[n])
		if err := sdpa.AttentionVarlenInto(out, lse, q, k, v, cuQ, cuK, opts); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range n {
			q0, q1, k0, k1 := cuQ[i], cuQ[i+1], cuK[i], cuK[i+1]
			if q1 == q0 {
				continue
			}
			got := sequence(out, q0, q1)
			if k1 == k0 {
				for _, x := range got.Data {
					if x != 0 {
						t.Fatalf("%s: sequence %d has no keys but output %g", name, i, x)
					}
				}
				for h := range hq {
					for j := q0; j < q1; j++ {
						if !math.IsInf(float64(lse[h*cuQ[n]+j]), -1) {
							t.Fatalf("%s: sequence %d has no keys but LSE %g", name, i, lse[h*cuQ[n]+j])
						}
					}
				}
				continue
			}
			want, wantLSE, err := sdpa.AttentionLSE(sequence(q, q0, q1), sequence(k, k0, k1), sequence(v, k0, k1), opts)
			if err != nil {
				t.Fatal(err)
			}
			if j := sameBits(got.Data, want.Data); j >= 0 {
				t.Fatalf("%s: sequence %d element %d: %g, want %g", name, i, j, got.Data[j], want.Data[j])
			}
			for h := range hq {
				gl := lse[h*cuQ[n]+q0 : h*cuQ[n]+q1]
				if j := sameBits(gl, wantLSE[h*(q1-q0):(h+1)*(q1-q0)]); j >= 0 {
					t.Fatalf("%s: sequence %d head %d LSE %d differs", name, i, h, j)
				}
			}
		}
	}
}

// TestVarlenErrors: bad offsets, layouts and shapes are errors, and so is
// a sequence whose FP8 data would overflow, with nothing written.
func TestVarlenErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 72))
	q, k := packed(rng, 2, 10, 16), packed(rng, 2, 12, 16)
	bhsd := &sdpa.Tensor{Data: q.Data, B: 1, H: 2, S: 10, D: 16}
	for _, c := range []struct {
		name       string
		q          *sdpa.Tensor
		cuQ, cuK   []int
		lse        []float32
		mentionErr string
	}{
		{"q offsets do not end at total", q, []int{0, 4, 9}, []int{0, 5, 12}, nil, "cuSeqQ"},
		{"k offsets do not start at 0", q, []int{0, 4, 10}, []int{1, 5, 12}, nil, "cuSeqK"},
		{"decreasing", q, []int{0, 6, 4, 10}, []int{0, 5, 6, 12}, nil, "decreases"},
		{"different counts", q, []int{0, 4, 10}, []int{0, 12}, nil, "offsets"},
		{"one offset", q, []int{0}, []int{0}, nil, "offsets"},
		{"bhsd", bhsd, []int{0, 10}, []int{0, 12}, nil, "BSHD"},
		{"short lse", q, []int{0, 10}, []int{0, 12}, make([]float32, 3), "lse"},
		// The first sequence has no keys (written directly): the head
		// ratio's error must still come before it.
		{"heads not a multiple", packed(rng, 3, 10, 16), []int{0, 4, 10}, []int{0, 0, 12}, nil, "multiple"},
		{"unknown mask after a keyless sequence", q, []int{0, 4, 10}, []int{0, 0, 12}, nil, "mask"},
		// Errors only a sequence's data shows (an FP8 score factor
		// beyond float32, from huge keys in the last sequence), after a
		// sequence that computes and one with no keys: neither is written.
		{"fp8 score factor of the last sequence", q, []int{0, 4, 7, 10}, []int{0, 5, 5, 12}, make([]float32, 20), "overflow"},
	} {
		out := packed(rng, c.q.H, 10, 16)
		keep := append([]float32(nil), out.Data...)
		keepLSE := append([]float32(nil), c.lse...)
		var opts *sdpa.Options
		kk := k
		switch {
		case strings.HasPrefix(c.name, "unknown mask"):
			opts = &sdpa.Options{Mask: 9}
		case strings.HasPrefix(c.name, "fp8"):
			opts = &sdpa.Options{Precision: sdpa.FP8E4M3, Scale: 1e6}
			kk = &sdpa.Tensor{Data: append([]float32(nil), k.Data...), B: 1, H: k.H, S: k.S, D: k.D, Layout: sdpa.BSHD}
			for i := 5 * k.H * k.D; i < len(kk.Data); i++ {
				kk.Data[i] *= 1e36
			}
		}
		err := sdpa.AttentionVarlenInto(out, c.lse, c.q, kk, kk, c.cuQ, c.cuK, opts)
		if !errors.Is(err, sdpa.ErrInvalid) || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.mentionErr)) {
			t.Errorf("%s: %v", c.name, err)
		}
		if sameBits(out.Data, keep) >= 0 || sameBits(c.lse, keepLSE) >= 0 {
			t.Errorf("%s: output written before the error", c.name)
		}
	}
}

// TestVarlenNoAllocs: after a warm-up call a varlen call allocates nothing.
func TestVarlenNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 73))
	cuQ, cuK := []int{0, 1, 9, 10}, []int{0, 30, 60, 61}
	q, k, v := packed(rng, 4, 10, 64), packed(rng, 2, 61, 64), packed(rng, 2, 61, 64)
	out, lse := packed(rng, 4, 10, 64), make([]float32, 40)
	opts := &sdpa.Options{Precision: sdpa.FP8E4M3, Mask: sdpa.CausalLowerRight, Backend: "cpu"}
	call := func() {
		if err := sdpa.AttentionVarlenInto(out, lse, q, k, v, cuQ, cuK, opts); err != nil {
			t.Fatal(err)
		}
	}
	call()
	if n := allocs.PerCall(20, call); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}
