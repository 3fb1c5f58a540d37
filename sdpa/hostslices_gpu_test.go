//go:build cuda

package sdpa_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// hostSliceShapes are the host-slice call's two measured shapes: the
// mission shape and a long grouped-query prefill.
var hostSliceShapes = []struct {
	name                  string
	b, hq, hkv, sq, sk, d int
}{
	{"mission", 2, 8, 8, 256, 256, 64},
	{"B1-Hq32-Hkv8-S4096-D128", 1, 32, 8, 4096, 4096, 128},
}

// BenchmarkHostSlicesCUDA: sdpa.AttentionInto on float32 host slices in
// and out, FP8E4M3, as a Go caller pays it: "cuda" named and the automatic
// choice (""), each call host-timed; "us/call" is the median call.
func BenchmarkHostSlicesCUDA(b *testing.B) {
	if _, err := sdpa.Open("cuda"); err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range hostSliceShapes {
		q, k, v := randTensor(rng, s.b, s.hq, s.sq, s.d), randTensor(rng, s.b, s.hkv, s.sk, s.d), randTensor(rng, s.b, s.hkv, s.sk, s.d)
		out := &sdpa.Tensor{Data: make([]float32, len(q.Data)), B: s.b, H: s.hq, S: s.sq, D: s.d}
		for _, be := range []string{"cuda", ""} {
			name := s.name + "/" + be
			if be == "" {
				name += "auto"
			}
			b.Run(name, func(b *testing.B) {
				opts := &sdpa.Options{Precision: sdpa.FP8E4M3, Backend: be}
				// The first call opens the device and fills its pools: not timed.
				if err := sdpa.AttentionInto(out, nil, q, k, v, opts); err != nil {
					b.Fatal(err)
				}
				var times []float64
				for b.Loop() {
					start := time.Now()
					if err := sdpa.AttentionInto(out, nil, q, k, v, opts); err != nil {
						b.Fatal(err)
					}
					times = append(times, time.Since(start).Seconds()*1e6)
				}
				b.ReportMetric(median(times), "us/call")
			})
		}
	}
}

// TestHostSlicesAutoGPU: with a GPU, the FP8 call that names no backend
// runs on "cuda" and gives what naming it gives, bit for bit, output and
// LSE, on both measured shapes' smaller kin and the mission shape; every
// element is written.
func TestHostSlicesAutoGPU(t *testing.T) {
	if _, err := sdpa.Open("cuda"); err != nil {
		t.Skipf("no cuda device: %v", err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 82))
	for _, s := range []struct{ b, hq, hkv, sq, sk, d int }{{2, 8, 8, 256, 256, 64}, {1, 8, 2, 1024, 1024, 128}} {
		q, k, v := randTensor(rng, s.b, s.hq, s.sq, s.d), randTensor(rng, s.b, s.hkv, s.sk, s.d), randTensor(rng, s.b, s.hkv, s.sk, s.d)
		var outs [2]*sdpa.Tensor
		var lses [2][]float32
		for i, be := range []string{"cuda", ""} {
			outs[i], lses[i] = poisoned(s.b, s.hq, s.sq, s.d)
			if err := sdpa.AttentionInto(outs[i], lses[i], q, k, v, &sdpa.Options{Precision: sdpa.FP8E4M3, Backend: be}); err != nil {
				t.Fatalf("%+v backend %q: %v", s, be, err)
			}
		}
		for j, pair := range [][2][]float32{{outs[0].Data, outs[1].Data}, {lses[0], lses[1]}} {
			for i := range pair[0] {
				x, y := pair[0][i], pair[1][i]
				if math.Float32bits(x) != math.Float32bits(y) || math.Float32bits(x) == sdpatest.Poison || x != x {
					t.Fatalf("%+v %s %d: %g named, %g automatic", s, [...]string{"output", "LSE"}[j], i, x, y)
				}
			}
		}
	}
}
