//go:build cuda

package sdpa_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// BenchmarkPublicPrefillGPU times what a program gets from the public API
// on the prefill shapes of docs/BENCHMARKS.md (sdpatest.PrefillShapes, which
// cmd/sdpabench -shapes prefill times too): Device.Attention on device
// tensors (FP8 tensors quantized once beforehand, and float32 tensors with
// FP8 precision, quantized by the call), captured once with Device.Capture
// and replayed, host-timed over back-to-back replays and the wait for the
// last (a download of a one-row tensor, ordered behind it on the device). Reports
// µs per call and TFLOP/s (Shape.FLOPs: 4·B·Hq·D times the keys each query sees).
func BenchmarkPublicPrefillGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 3))
	rt := newReplayTimer(b, dev)
	for _, ps := range sdpatest.PrefillShapes {
		s := ps.Shape
		name := strings.ReplaceAll(ps.Spec(), ":", "-")
		flops := s.FLOPs(ps.Mask)
		in := sdpatest.RandomInputs(rng, s, 1)
		var ts [3]*sdpa.DeviceTensor
		for i, x := range []struct {
			data []float32
			h, n int
		}{{in.Q, s.Hq, s.Sq}, {in.K, s.Hkv, s.Sk}, {in.V, s.Hkv, s.Sk}} {
			t := &sdpa.Tensor{Data: layout.Permute(x.data, s.B, x.h, x.n, s.D, ps.Layout), B: s.B, H: x.h, S: x.n, D: s.D, Layout: ps.Layout}
			if ts[i], err = dev.Upload(t); err != nil {
				b.Fatal(err)
			}
		}
		var fp8 [3]*sdpa.DeviceTensor
		for i := range fp8 {
			if fp8[i], err = dev.Quantize(ts[i]); err != nil {
				b.Fatal(err)
			}
		}
		out, err := dev.NewTensor(s.B, s.Hq, s.Sq, s.D, ps.Layout)
		if err != nil {
			b.Fatal(err)
		}
		opts := &sdpa.Options{Precision: sdpa.FP8E4M3, Mask: ps.Mask}
		reps := 500 // replays a timed iteration: about 20 ms or more of device time
		if flops > 1e11 {
			reps = 20
		}
		for _, in := range []struct {
			name string
			t    [3]*sdpa.DeviceTensor
		}{{"fp8-tensors", fp8}, {"float32-tensors", ts}} {
			b.Run(name+"/"+in.name, func(b *testing.B) {
				us := rt.micros(b, func() error { return dev.Attention(out, nil, in.t[0], in.t[1], in.t[2], opts) }, reps)
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

// replayTimer times a captured call as the public GPU benchmarks do: reps
// replays of its graph back to back and the wait for the last (a download
// of a one-row tensor, ordered behind them on the device), all timed, each
// b.Loop iteration.
type replayTimer struct {
	dev  *sdpa.Device
	wait *sdpa.DeviceTensor
	sink *sdpa.Tensor
}

// newReplayTimer times calls on dev; its one-row tensor is freed when b
// ends.
func newReplayTimer(b *testing.B, dev *sdpa.Device) *replayTimer {
	wait, err := dev.NewTensor(1, 1, 1, 64, sdpa.BHSD)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wait.Free() })
	return &replayTimer{dev: dev, wait: wait, sink: &sdpa.Tensor{Data: make([]float32, 64), B: 1, H: 1, S: 1, D: 64}}
}

// micros captures call into a graph, replays it once untimed, then times
// reps replays an iteration and returns the µs per call.
func (r *replayTimer) micros(b *testing.B, call func() error, reps int) float64 {
	g, err := r.dev.Capture(call)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	replays := func(n int) {
		for range n {
			if err := g.Replay(); err != nil {
				b.Fatal(err)
			}
		}
		if err := r.wait.Download(r.sink); err != nil {
			b.Fatal(err)
		}
	}
	replays(1)
	for b.Loop() {
		replays(reps)
	}
	return float64(b.Elapsed().Nanoseconds()) / 1e3 / float64(b.N*reps)
}
