package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/fp8attn/fp8attn/internal/allocs"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// poisoned returns a [b][h][s][d] tensor and an lse buffer filled with the
// poison pattern.
func poisoned(b, h, s, d int) (*sdpa.Tensor, []float32) {
	p := math.Float32frombits(sdpatest.Poison)
	out := &sdpa.Tensor{Data: make([]float32, b*h*s*d), B: b, H: h, S: s, D: d}
	lse := make([]float32, b*h*s)
	for i := range out.Data {
		out.Data[i] = p
	}
	for i := range lse {
		lse[i] = p
	}
	return out, lse
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestIntoEqualsAllocating: AttentionInto and AttentionQuantizedInto write
// exactly what the allocating calls return, for both precisions, every
// mask, GQA, with and without LSE and accuracy options.
func TestIntoEqualsAllocating(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 31))
	q, k, v := randTensor(rng, 2, 4, 37, 64), randTensor(rng, 2, 2, 53, 64), randTensor(rng, 2, 2, 53, 64)
	for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
		for _, m := range []sdpa.Mask{sdpa.NoMask, sdpa.CausalUpperLeft, sdpa.CausalLowerRight} {
			for _, smooth := range []bool{false, true} {
				opts := &sdpa.Options{Precision: prec, Mask: m, SmoothK: smooth, Backend: "cpu"}
				if smooth {
					opts.OutlierChannels = 2
				}
				name := fmt.Sprintf("%v/%v/smooth=%v", prec, m, smooth)
				want, wantLSE, err := sdpa.AttentionLSE(q, k, v, opts)
				if err != nil {
					t.Fatal(err)
				}
				out, lse := poisoned(2, 4, 37, 64)
				if err := sdpa.AttentionInto(out, lse, q, k, v, opts); err != nil {
					t.Fatal(err)
				}
				if i := sameBits(out.Data, want.Data); i >= 0 {
					t.Fatalf("%s: out[%d] %g, want %g", name, i, out.Data[i], want.Data[i])
				}
				if i := sameBits(lse, wantLSE); i >= 0 {
					t.Fatalf("%s: lse[%d] %g, want %g", name, i, lse[i], wantLSE[i])
				}
				out2, _ := poisoned(2, 4, 37, 64)
				if err := sdpa.AttentionInto(out2, nil, q, k, v, opts); err != nil || sameBits(out2.Data, want.Data) >= 0 {
					t.Fatalf("%s: without LSE: %v", name, err)
				}
			}
		}
	}
	q8, _ := sdpa.Quantize(q)
	k8, _ := sdpa.Quantize(k)
	v8, _ := sdpa.Quantize(v)
	want, wantLSE, err := sdpa.AttentionQuantized(q8, k8, v8, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, lse := poisoned(2, 4, 37, 64)
	if err := sdpa.AttentionQuantizedInto(out, lse, q8, k8, v8, nil); err != nil || sameBits(out.Data, want.Data) >= 0 || sameBits(lse, wantLSE) >= 0 {
		t.Fatalf("AttentionQuantizedInto differs: %v", err)
	}
}

// TestIntoErrors: bad outputs are reported before anything is written,
// by AttentionInto and AttentionQuantizedInto alike.
func TestIntoErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 32))
	q, k := randTensor(rng, 1, 2, 5, 16), randTensor(rng, 1, 2, 7, 16)
	q8, err := sdpa.Quantize(q)
	if err != nil {
		t.Fatal(err)
	}
	k8, err := sdpa.Quantize(k)
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func(out *sdpa.Tensor, lse []float32) error
	}{
		{"AttentionInto", func(out *sdpa.Tensor, lse []float32) error { return sdpa.AttentionInto(out, lse, q, k, k, nil) }},
		{"AttentionQuantizedInto", func(out *sdpa.Tensor, lse []float32) error {
			return sdpa.AttentionQuantizedInto(out, lse, q8, k8, k8, nil)
		}},
	}
	for _, c := range []struct {
		name string
		out  func() (*sdpa.Tensor, []float32)
	}{
		{"nil out", func() (*sdpa.Tensor, []float32) { return nil, nil }},
		{"wrong shape", func() (*sdpa.Tensor, []float32) { return poisoned(1, 2, 7, 16) }},
		{"the result's elements in another shape", func() (*sdpa.Tensor, []float32) { return poisoned(1, 5, 2, 16) }},
		{"another layout", func() (*sdpa.Tensor, []float32) {
			o, l := poisoned(1, 2, 5, 16)
			o.Layout = sdpa.BSHD
			return o, l
		}},
		{"short data", func() (*sdpa.Tensor, []float32) {
			o, l := poisoned(1, 2, 5, 16)
			o.Data = o.Data[:10]
			return o, l
		}},
		{"short lse", func() (*sdpa.Tensor, []float32) {
			o, l := poisoned(1, 2, 5, 16)
			return o, l[:3]
		}},
	} {
		for _, call := range calls {
			out, lse := c.out()
			err := call.call(out, lse)
			if !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("%s, %s: %v", call.name, c.name, err)
			}
			if out != nil {
				for _, x := range append(out.Data, lse...) {
					if math.Float32bits(x) != sdpatest.Poison {
						t.Fatalf("%s, %s: output written before the error", call.name, c.name)
					}
				}
			}
		}
	}
}

// TestIntoNoAllocs: after a warm-up call, AttentionInto allocates nothing
// on the CPU backend, named or picked by default (Backend ""): FP32,
// FP8E4M3 (quantization shared with the helper goroutines above 64 Ki
// elements), with the accuracy options, and a GQA decode step (the packed
// path). Where a GPU is present, Backend "" runs FP8 calls on "cuda",
// whose host-slice path copies through staging buffers and is not held to
// this; its FP32 calls still run on the CPU and are.
func TestIntoNoAllocs(t *testing.T) {
	_, err := sdpa.Open("cuda")
	gpu := err == nil
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 33))
	for _, s := range []struct{ b, h, hkv, sq, sk, d int }{{1, 2, 2, 16, 24, 64}, {2, 8, 8, 64, 128, 64}, {1, 8, 2, 1, 300, 128}} {
		q, k, v := randTensor(rng, s.b, s.h, s.sq, s.d), randTensor(rng, s.b, s.hkv, s.sk, s.d), randTensor(rng, s.b, s.hkv, s.sk, s.d)
		out, lse := poisoned(s.b, s.h, s.sq, s.d)
		for _, opts := range []*sdpa.Options{
			{}, {Precision: sdpa.FP8E4M3},
			{Backend: "cpu"}, {Backend: "cpu", Precision: sdpa.FP8E4M3},
			{Backend: "cpu", Precision: sdpa.FP8E4M3, SmoothK: true, Hadamard: true, Mask: sdpa.CausalLowerRight},
			{Backend: "cpu", Precision: sdpa.FP8E4M3, OutlierChannels: 4},
			{Backend: "cpu", Mask: sdpa.CausalLowerRight, SlidingWindow: 7, Softcap: 20, Sinks: make([]float32, s.h)},
			{Backend: "cpu", Precision: sdpa.FP8E4M3, Mask: sdpa.CausalUpperLeft, SlidingWindow: 100, Sinks: make([]float32, s.h)},
		} {
			call := func() {
				if err := sdpa.AttentionInto(out, lse, q, k, v, opts); err != nil {
					t.Fatal(err)
				}
			}
			call()
			if gpu && opts.Backend == "" && opts.Precision == sdpa.FP8E4M3 {
				continue // runs on "cuda" (above)
			}
			if n := allocs.PerCall(20, call); n != 0 {
				t.Errorf("%+v %+v: %v allocations per call", s, *opts, n)
			}
		}
	}
}

// TestConcurrentInto: many goroutines share the package's pools and the CPU
// backend, each with its own inputs and outputs; every result equals the
// same call made alone. Run under -race in CI.
func TestConcurrentInto(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(sd, uint64(40+g)))
			for c := range 4 {
				sq, sk := 1+rng.IntN(90), 1+rng.IntN(200)
				q, k, v := randTensor(rng, 1, 4, sq, 64), randTensor(rng, 1, 2, sk, 64), randTensor(rng, 1, 2, sk, 64)
				opts := &sdpa.Options{Precision: sdpa.Precision(rng.IntN(2)), Mask: sdpa.Mask(rng.IntN(3)), SmoothK: rng.IntN(2) == 0, Backend: "cpu"}
				out, lse := poisoned(1, 4, sq, 64)
				if err := sdpa.AttentionInto(out, lse, q, k, v, opts); err != nil {
					errs <- err
					return
				}
				want, wantLSE, err := sdpa.AttentionLSE(q, k, v, opts)
				if err != nil {
					errs <- err
					return
				}
				if i, j := sameBits(out.Data, want.Data), sameBits(lse, wantLSE); i >= 0 || j >= 0 {
					errs <- fmt.Errorf("goroutine %d call %d %+v: differs at out %d, lse %d", g, c, *opts, i, j)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
