//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// hopperPrefillShapes are the prefill shapes of docs/BENCHMARKS.md's
// Hopper tables.
var hopperPrefillShapes = []struct {
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
}

// hopperBench is one prefill shape of a Hopper benchmark: its problem,
// FLOPs, name, random inputs, their FP8 codes and scales on the device
// (deviceInputs, in the shape's layout), a resident over them and the
// graph replays a timing takes.
type hopperBench struct {
	p     *backend.Problem
	flops float64
	name  string
	in    sdpatest.Inputs
	bufs  [6]*buffer
	r     *resident
	iters int
}

// forHopperPrefillShapes calls f with each of hopperPrefillShapes (inputs
// drawn from a generator seeded with sdpatest.Seed() and stream), then
// frees its buffers; the benchmark is skipped without a Hopper module.
func forHopperPrefillShapes(b *testing.B, stream uint64, f func(d *device, h hopperBench)) {
	d, err := openDevice(0)
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	if d.hopperErr != nil {
		b.Skip(d.hopperErr)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), stream))
	for _, c := range hopperPrefillShapes {
		s := c.s
		h := hopperBench{p: &backend.Problem{Shape: s, Scale: 0.125, Mask: c.m, Layout: c.l}, iters: 200,
			flops: 4 * float64(s.B*s.Hq) * float64(s.Sq) * float64(s.Sk) * float64(s.D),
			name:  fmt.Sprintf("B%dH%dKV%dS%dD%d-%v-%v", s.B, s.Hq, s.Hkv, s.Sq, s.D, c.m, c.l)}
		if c.m != backend.NoMask {
			h.flops /= 2
		}
		if h.flops > 1e11 {
			h.iters = 50
		}
		h.in = sdpatest.RandomInputs(rng, s, 1)
		var free func()
		h.bufs, free = deviceInputs(b, d, s, c.l, h.in)
		if h.r, err = d.newResident(h.p, h.bufs, nil, nil); err != nil {
			b.Fatal(err)
		}
		f(d, h)
		if err := h.r.Free(); err != nil {
			b.Fatal(err)
		}
		free()
	}
}

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
	forHopperPrefillShapes(b, 5, func(d *device, h hopperBench) {
		r, iters, flops, name := h.r, h.iters, h.flops, h.name
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
	})
}

// BenchmarkHopperFloat32Paths times, on the prefill shapes, the two ways
// stage 9 runs float32 device tensors at FP8 precision, beside the call on
// the same inputs as FP8 tensors (the tensor form over codes: what
// Device.Attention runs on them), in one process: the device Quantize
// (amax, then encode) followed by that tensor form, and the fused path
// (AttentionQuantizing's: quant_pack9 or its long form writing the images,
// then the fused attention entry; where it takes the shape), and that
// quantization alone. Device time per call in CUDA-graph replay, the
// median of batches; "ratio" is the fused path's time over the FP8-tensor
// call's (the target is 1.2 at most). Run with -benchtime 1x.
func BenchmarkHopperFloat32Paths(b *testing.B) {
	forHopperPrefillShapes(b, 6, func(d *device, h hopperBench) {
		s, l, in, bufs, r := h.p.Shape, h.p.Layout, h.in, h.bufs, h.r
		srcs, freeSrcs := floatBuffers(b, d, layout.Permute(in.Q, s.B, s.Hq, s.Sq, s.D, l),
			layout.Permute(in.K, s.B, s.Hkv, s.Sk, s.D, l), layout.Permute(in.V, s.B, s.Hkv, s.Sk, s.D, l))
		defer freeSrcs()
		fr, err := d.newResident(h.p, [6]*buffer{srcs[0], srcs[1], srcs[2], bufs[3], bufs[4], bufs[5]}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer fr.Free()
		fr.fused = true
		qp := callQuantParams(s, l, srcs, bufs)
		// The paths this shape has: the fused one where AttentionQuantizing
		// takes it, and its quantization alone where a kernel of its own
		// does it (not the one-tile form quantizing its own inputs).
		st := tiles.HopperStage
		long, fused := d.quantPackFor(h.p)
		k := d.hopperFor(h.p)
		alone := fused && !k.attention(s, true).quantizes
		calls := []func() error{
			func() error { return r.launch(st) },
			func() error { return errors.Join(d.quantize(qp), r.launch(st)) },
		}
		if fused {
			calls = append(calls, func() error { return fr.launch(st) })
		}
		if alone {
			calls = append(calls, func() error { return fr.launchQuantPack(k, fr.fusedParams()) }) // (the images are fr.launch's)
		}
		b.Run(h.name, func(b *testing.B) {
			times := make([]float64, len(calls))
			for b.Loop() {
				err := d.do(func() error {
					for i, call := range calls {
						ts, err := d.timeCalls(h.iters, true, call)
						if err != nil {
							return err
						}
						times[i] = median(ts)
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(times[0], "us/fp8-tensors")
			b.ReportMetric(times[1], "us/quantize-tensor-form")
			if !fused {
				b.Logf("%s: FP8 tensors %.1f µs, float32 quantized then tensor form %.1f µs (not fused)", h.name, times[0], times[1])
				return
			}
			b.ReportMetric(times[2], "us/fused")
			b.ReportMetric(h.flops/times[2]/1e6, "TFLOP/s-fused")
			b.ReportMetric(times[2]/times[0], "ratio")
			if !alone {
				b.Logf("%s: FP8 tensors %.1f µs, float32 quantized then tensor form %.1f µs, fused %.1f µs (the one-tile form quantizing its inputs)",
					h.name, times[0], times[1], times[2])
				return
			}
			bytes := 5 * float64(s.B) * float64(s.Hq*s.Sq+2*s.Hkv*s.Sk) * float64(s.D) // float32 read, codes written
			b.Logf("%s: FP8 tensors %.1f µs, float32 quantized then tensor form %.1f µs, fused %.1f µs (long form %v; its quantization alone %.1f µs, %.0f GB/s)",
				h.name, times[0], times[1], times[2], long, times[3], bytes/times[3]/1e3)
			b.ReportMetric(times[3], "us/fused-quantization")
		})
	})
}

// callQuantParams describes a call's float32 Q, K and V (srcs, shape s in
// layout l) quantized into the codes and scales of bufs (Q, K, V codes,
// then their scales), for device.quantize.
func callQuantParams(s backend.Shape, l backend.Layout, srcs []*buffer, bufs [6]*buffer) *quantParams {
	qp := &quantParams{N: 3}
	for i := range 3 {
		h, n := s.Hkv, s.Sk
		if i == 0 {
			h, n = s.Hq, s.Sq
		}
		qp.T[i] = quantTensorOf(srcs[i], bufs[i], bufs[3+i], tensorShape{s.B, h, n, s.D, l})
	}
	return qp
}
