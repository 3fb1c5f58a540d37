//go:build cuda

package sdpa_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
)

// BenchmarkPublicPrefillGPU times what a program gets from the public API
// on the prefill shapes of docs/BENCHMARKS.md: Device.Attention on device
// tensors (FP8 tensors quantized once beforehand, and float32 tensors with
// FP8 precision, quantized by the call), captured once with Device.Capture
// and replayed, host-timed over back-to-back replays and the wait for the
// last (a download of a one-row tensor, ordered behind it on the device). Reports
// µs per call and TFLOP/s (4·B·Hq·Sq·Sk·D, halved for the causal shape).
func BenchmarkPublicPrefillGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 3))
	wait, err := dev.NewTensor(1, 1, 1, 64, sdpa.BHSD)
	if err != nil {
		b.Fatal(err)
	}
	defer wait.Free()
	sink := &sdpa.Tensor{Data: make([]float32, 64), B: 1, H: 1, S: 1, D: 64}
	for _, s := range []struct {
		b, h, n, d int
		mask       sdpa.Mask
	}{
		{2, 8, 256, 64, sdpa.NoMask}, {1, 8, 2048, 64, sdpa.NoMask},
		{4, 32, 4096, 64, sdpa.NoMask}, {4, 32, 4096, 96, sdpa.NoMask}, {4, 32, 4096, 128, sdpa.NoMask},
		{4, 32, 4096, 128, sdpa.CausalLowerRight}, {4, 32, 4096, 256, sdpa.NoMask}, {2, 16, 16384, 128, sdpa.NoMask},
	} {
		name := fmt.Sprintf("B%dH%dS%dD%d-%v", s.b, s.h, s.n, s.d, s.mask)
		flops := 4 * float64(s.b*s.h) * float64(s.n) * float64(s.n) * float64(s.d)
		if s.mask != sdpa.NoMask {
			flops /= 2
		}
		var ts [3]*sdpa.DeviceTensor
		for i := range ts {
			if ts[i], err = dev.Upload(randTensor(rng, s.b, s.h, s.n, s.d)); err != nil {
				b.Fatal(err)
			}
		}
		var fp8 [3]*sdpa.DeviceTensor
		for i := range fp8 {
			if fp8[i], err = dev.Quantize(ts[i]); err != nil {
				b.Fatal(err)
			}
		}
		out, err := dev.NewTensor(s.b, s.h, s.n, s.d, sdpa.BHSD)
		if err != nil {
			b.Fatal(err)
		}
		opts := &sdpa.Options{Precision: sdpa.FP8E4M3, Mask: s.mask}
		reps := 500 // replays a timed iteration: about 20 ms or more of device time
		if flops > 1e11 {
			reps = 20
		}
		for _, in := range []struct {
			name string
			t    [3]*sdpa.DeviceTensor
		}{{"fp8-tensors", fp8}, {"float32-tensors", ts}} {
			b.Run(name+"/"+in.name, func(b *testing.B) {
				g, err := dev.Capture(func() error { return dev.Attention(out, nil, in.t[0], in.t[1], in.t[2], opts) })
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				if err := g.Replay(); err != nil {
					b.Fatal(err)
				}
				if err := wait.Download(sink); err != nil {
					b.Fatal(err)
				}
				for b.Loop() { // reps replays and the wait for the last, all timed
					for range reps {
						if err := g.Replay(); err != nil {
							b.Fatal(err)
						}
					}
					if err := wait.Download(sink); err != nil {
						b.Fatal(err)
					}
				}
				us := float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N*reps)
				b.ReportMetric(us, "us/call")
				b.ReportMetric(flops/us/1e6, "TFLOP/s")
			})
		}
		for _, t := range append(ts[:], append(fp8[:], out)...) {
			if err := t.Free(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
