package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// The public call on a device (public mode): on a backend that keeps
// tensors in its own memory and records graphs ("cuda"), sdpabench times
// what a program gets from the API: Device.Attention on device tensors,
// the call captured with Device.Capture and the Graph replayed. Two rows a
// shape: FP8 device tensors (made once by Device.Quantize) and float32
// device tensors with FP8 precision (quantized inside the call). A graph
// holds calls back to back (20, or 2 from 1e11 FLOPs, as bench/graphtime.py
// captures the peers'; -graph-calls sets it); a sample is a batch of replays host-timed up to the
// end of a one-row download ordered behind them on the device, divided by
// the calls it ran; p50 and p90 over the samples. -kernel-only (or -kernel)
// times the kernel alone instead, labelled so.

// spec is one item of -shapes: a shape with its mask and layout.
type spec struct {
	name   string // as given
	shape  backend.Shape
	mask   backend.Mask
	layout backend.Layout
}

// parseSpecs reads -shapes: comma-separated names of sdpatest.NamedShapes,
// "prefill" (every row of sdpatest.PrefillShapes), or BxHxSqxSkxD and
// BxHqxHkvxSqxSkxD, each optionally followed by ":causal", ":causal-lr",
// ":none" and ":bshd" or ":bhsd", which override mask and l for that item.
func parseSpecs(list string, mask backend.Mask, l backend.Layout) ([]spec, error) {
	var out []spec
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "prefill" {
			for _, ps := range sdpatest.PrefillShapes {
				out = append(out, spec{name: ps.Spec(), shape: ps.Shape, mask: ps.Mask, layout: ps.Layout})
			}
			continue
		}
		fields := strings.Split(item, ":")
		s, err := sdpatest.ParseShape(fields[0])
		if err != nil {
			return nil, err
		}
		sp := spec{name: item, shape: s, mask: mask, layout: l}
		for _, f := range fields[1:] {
			switch f {
			case "bhsd":
				sp.layout = backend.BHSD
			case "bshd":
				sp.layout = backend.BSHD
			default:
				if sp.mask, err = backend.ParseMask(f); err != nil {
					return nil, fmt.Errorf("shape %q: suffix %q: want causal, causal-lr, none, bshd or bhsd", item, f)
				}
			}
		}
		out = append(out, sp)
	}
	return out, nil
}

// publicBackend reports whether be keeps tensors in device memory and
// records graphs: sdpabench times the public call on it.
func publicBackend(be backend.Backend) bool {
	_, mem := be.(backend.Memory)
	_, capt := be.(backend.Capturer)
	return mem && capt
}

// header is a problem without data, to select a backend by shape.
func header(sp spec, prec backend.Precision) *backend.Problem {
	return &backend.Problem{Shape: sp.shape, Scale: float32(1 / math.Sqrt(float64(sp.shape.D))), Mask: sp.mask,
		Precision: prec, Layout: sp.layout}
}

// callsPerGraph is how many calls a graph holds: as bench/graphtime.py
// captures the peers'.
func callsPerGraph(flops float64) int {
	if flops < 1e11 {
		return 20
	}
	return 2
}

// attendFunc is the call public mode captures: Device.Attention, or a
// broken variant in the tests.
type attendFunc func(d *sdpa.Device, out, q, k, v *sdpa.DeviceTensor, o *sdpa.Options) error

func deviceAttention(d *sdpa.Device, out, q, k, v *sdpa.DeviceTensor, o *sdpa.Options) error {
	return d.Attention(out, nil, q, k, v, o)
}

// tensorIn returns x, a [b][h][s][d] BHSD slice, as a tensor in layout l.
func tensorIn(x []float32, b, h, s, d int, l backend.Layout) *sdpa.Tensor {
	return &sdpa.Tensor{Data: layout.Permute(x, b, h, s, d, l), B: b, H: h, S: s, D: d, Layout: l}
}

// runPublic validates (unless -nocheck) and times Device.Attention on dev
// for sp: one Result for FP8 device tensors (FP8 precision only) and one
// for float32 device tensors.
func (c config) runPublic(dev *sdpa.Device, sp spec) (res []Result, err error) {
	s := sp.shape
	seed := sdpatest.Seed()
	rng := rand.New(rand.NewPCG(seed, 0))
	in := sdpatest.RandomInputs(rng, s, 1)
	scale := float32(1 / math.Sqrt(float64(s.D)))
	flops := s.FLOPs(sp.mask)
	fmt.Printf("%s: %s, mask %v, layout %v, %v, public call Device.Attention on device %s, seed %d\n",
		sp.name, describe(s), sp.mask, sp.layout, c.prec, dev.Name(), seed)

	var want, exact []float64
	var tol tiers
	if c.check {
		fmt.Fprintf(os.Stderr, "[%s seed %d] float64 oracle...\n", sp.name, seed)
		p, _, _ := sdpatest.NewProblemLayout(s, in, scale, sp.mask, c.prec, sp.layout)
		if err := p.Validate(); err != nil {
			return nil, err
		}
		var wg sync.WaitGroup // the two oracles side by side
		if c.prec == backend.FP8E4M3 {
			e, _, _ := sdpatest.NewProblemLayout(s, in, scale, sp.mask, backend.FP32, sp.layout)
			wg.Go(func() { exact, _ = oracle.Naive(e) })
		}
		want, _ = oracle.Naive(p)
		wg.Wait()
		tol = c.tiersFor(dev.Name(), p)
	}

	var free []*sdpa.DeviceTensor
	defer func() {
		for _, t := range free {
			err = errors.Join(err, t.Free())
		}
	}()
	upload := func(t *sdpa.Tensor) (*sdpa.DeviceTensor, error) {
		dt, err := dev.Upload(t)
		if err == nil {
			free = append(free, dt)
		}
		return dt, err
	}
	var f32, f8 [3]*sdpa.DeviceTensor
	for i, x := range []struct {
		data []float32
		h, n int
	}{{in.Q, s.Hq, s.Sq}, {in.K, s.Hkv, s.Sk}, {in.V, s.Hkv, s.Sk}} {
		if f32[i], err = upload(tensorIn(x.data, s.B, x.h, x.n, s.D, sp.layout)); err != nil {
			return nil, err
		}
		if c.prec == backend.FP8E4M3 {
			if f8[i], err = dev.Quantize(f32[i]); err != nil {
				return nil, err
			}
			free = append(free, f8[i])
		}
	}
	in = sdpatest.Inputs{} // the host copies are no longer needed
	out, err := dev.NewTensor(s.B, s.Hq, s.Sq, s.D, sp.layout)
	if err != nil {
		return nil, err
	}
	free = append(free, out)
	wait, err := dev.NewTensor(1, 1, 1, 64, sdpa.BHSD)
	if err != nil {
		return nil, err
	}
	free = append(free, wait)
	sink := &sdpa.Tensor{Data: make([]float32, 64), B: 1, H: 1, S: 1, D: 64}

	kinds := []struct {
		name, label string
		t           [3]*sdpa.DeviceTensor
	}{{"fp8-tensors", "FP8 device tensors", f8}, {"float32-tensors", "float32 device tensors", f32}}
	if c.prec != backend.FP8E4M3 {
		kinds = kinds[1:]
	}
	opts := &sdpa.Options{Scale: scale, Mask: sp.mask, Precision: c.prec}
	attend := c.attend
	if attend == nil {
		attend = deviceAttention
	}
	calls := callsPerGraph(flops)
	if c.graphCalls > 0 {
		calls = c.graphCalls
	}
	for _, kind := range kinds {
		r := Result{Shape: sp.name, Seed: seed, Backend: dev.Name(), Precision: c.prec.String(), Mask: sp.mask.String(),
			Layout: sp.layout.String(), Inputs: kind.name, Timing: "public call, graph replay", CallsPerGraph: calls,
			Date: time.Now().UTC().Format(time.RFC3339)}
		g, err := dev.Capture(func() error {
			for range calls {
				if err := attend(dev, out, kind.t[0], kind.t[1], kind.t[2], opts); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if c.check {
			if err := c.checkPublic(&r, g, out, sp, want, exact, tol); err != nil {
				return nil, errors.Join(err, g.Close())
			}
		}
		times, replays, err := timeReplays(g, wait, sink, c.iters)
		if err = errors.Join(err, g.Close()); err != nil {
			return nil, err
		}
		for i := range times {
			times[i] /= float64(calls)
		}
		sort.Float64s(times)
		r.GPUP50us, r.GPUP90us = times[len(times)/2], times[len(times)*9/10]
		r.GFLOPs = flops / (r.GPUP50us * 1e3)
		r.Iters = len(times) * replays * calls
		fmt.Printf("  time   public call, graph replay, %-22s p50 %s p90 %s  %s  (%d calls a graph, %d replays a sample, %d samples)\n",
			kind.label+":", fmtDur(r.GPUP50us), fmtDur(r.GPUP90us), fmtRate(r.GFLOPs), calls, replays, len(times))
		res = append(res, r)
	}
	return res, nil
}

// checkPublic replays g once into out, poisoned beforehand so that an
// element no call writes is caught, and holds out to the oracle's want
// within tol's tiers (and, for FP8, reports its distance to exact attention).
func (c config) checkPublic(r *Result, g *sdpa.Graph, out *sdpa.DeviceTensor, sp spec, want, exact []float64, tol tiers) error {
	s := sp.shape
	host := &sdpa.Tensor{Data: make([]float32, s.B*s.Hq*s.Sq*s.D), B: s.B, H: s.Hq, S: s.Sq, D: s.D, Layout: sp.layout}
	poison := math.Float32frombits(sdpatest.Poison)
	for i := range host.Data {
		host.Data[i] = poison
	}
	if err := out.CopyFrom(host); err != nil {
		return err
	}
	if err := g.Replay(); err != nil {
		return err
	}
	if err := out.Download(host); err != nil {
		return err
	}
	fmt.Printf("  check  %s  %s\n", r.Inputs, tol.judge(r, host.Data, want))
	if exact != nil {
		r.RelL2Exact = sdpatest.Compare(host.Data, exact, sdpatest.Tolerance{Atol: math.Inf(1)}).RelL2
		fmt.Printf("         FP8 error: relative L2 %.3g against exact attention on the unquantized inputs\n", r.RelL2Exact)
	}
	return nil
}

// timeReplays returns per-replay times in µs of g, one a sample: a batch
// of back-to-back replays host-timed up to the end of a download of wait
// (ordered behind them on the device), divided by the batch's replays. A
// sample lasts about 5 ms; samples is their number (0: enough for about
// half a second, 10 to 200).
func timeReplays(g *sdpa.Graph, wait *sdpa.DeviceTensor, sink *sdpa.Tensor, samples int) (times []float64, replays int, err error) {
	batch := func(n int) (float64, error) {
		t0 := time.Now()
		for range n {
			if err := g.Replay(); err != nil {
				return 0, err
			}
		}
		if err := wait.Download(sink); err != nil {
			return 0, err
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e3, nil
	}
	var one float64
	for range 3 { // warm up; the last estimates one replay
		if one, err = batch(1); err != nil {
			return nil, 0, err
		}
	}
	replays = max(1, min(1000, int(5000/max(one, 1e-3))))
	if samples <= 0 {
		samples = max(10, min(200, int(5e5/(one*float64(replays)))))
	}
	times = make([]float64, samples)
	for i := range times {
		t, err := batch(replays)
		if err != nil {
			return nil, 0, err
		}
		times[i] = t / float64(replays)
	}
	return times, replays, nil
}

// fmtRate prints a GFLOP/s figure, in TFLOP/s from 1000.
func fmtRate(gflops float64) string {
	if gflops >= 1000 {
		return fmt.Sprintf("%.1f TFLOP/s", gflops/1000)
	}
	return fmt.Sprintf("%.2f GFLOP/s", gflops)
}
