//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// BenchmarkHopperInputPaths times, on the prefill shapes of
// docs/BENCHMARKS.md, the three ways the Hopper kernel gets FP8 device
// inputs, on one resident over the same buffers, in one process: the
// tensor form (one launch over the caller's tensors: what
// Device.Attention runs), the pack path (score factors, three pack
// kernels, the image form: what it ran before the tensor form), and the
// image form alone over images packed once (kernel only, as sdpabench's
// -kernel figures). Device time per call in CUDA-graph replay, the median
// of batches; run with -benchtime 1x.
func BenchmarkHopperInputPaths(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	if d.hopperErr != nil {
		b.Skip(d.hopperErr)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 5))
	for _, c := range []struct {
		s backend.Shape
		m backend.Mask
		l backend.Layout
	}{
		{backend.Shape{B: 2, Hq: 8, Hkv: 8, Sq: 256, Sk: 256, D: 64}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 2048, Sk: 2048, D: 64}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 64}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 96}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, backend.NoMask, backend.BSHD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, backend.CausalLowerRight, backend.BHSD},
		{backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 256}, backend.NoMask, backend.BHSD},
		{backend.Shape{B: 2, Hq: 16, Hkv: 16, Sq: 16384, Sk: 16384, D: 128}, backend.NoMask, backend.BHSD},
	} {
		s := c.s
		flops := 4 * float64(s.B*s.Hq) * float64(s.Sq) * float64(s.Sk) * float64(s.D)
		if c.m != backend.NoMask {
			flops /= 2
		}
		in := sdpatest.RandomInputs(rng, s, 1)
		bufs, free := deviceInputs(b, d, s, c.l, in)
		r, err := d.NewResident(&backend.Problem{Shape: s, Scale: 0.125, Mask: c.m, Layout: c.l}, bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5])
		if err != nil {
			b.Fatal(err)
		}
		iters := 200
		if flops > 1e11 {
			iters = 50
		}
		name := fmt.Sprintf("B%dH%dKV%dS%dD%d-%v-%v", s.B, s.Hq, s.Hkv, s.Sq, s.D, c.m, c.l)
		sc := r.scores
		for _, path := range []string{"tensor-form", "pack-path", "image-form-kernel-only"} {
			b.Run(name+"/"+path, func(b *testing.B) {
				// The paths by the resident's state: the tensor form unless
				// refused; the pack path repacks and recomputes the factors at
				// every launch; without scores, nothing is repacked.
				r.tensorsRefused, r.scores = path != "tensor-form", sc
				if path == "image-form-kernel-only" {
					if err := r.Run(tiles.HopperStage); err != nil { // pack once
						b.Fatal(err)
					}
					r.scores = nil
				}
				defer func() { r.tensorsRefused, r.scores = false, sc }()
				var us float64
				for b.Loop() {
					ts, err := r.Times(tiles.HopperStage, iters, true)
					if err != nil {
						b.Fatal(err)
					}
					slices.Sort(ts)
					us = ts[len(ts)/2]
				}
				b.ReportMetric(us, "us/call")
				b.ReportMetric(flops/us/1e6, "TFLOP/s")
			})
		}
		if err := r.Free(); err != nil {
			b.Fatal(err)
		}
		free()
	}
}
