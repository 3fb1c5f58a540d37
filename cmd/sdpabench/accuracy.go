package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// The accuracy mode (-accuracy): the FP8 error of the public call on the
// cases the cuDNN FP8 peer's --accuracy runs, so that the two print side by
// side. Each case draws Q and K from N(0,1) and V from N(0,1) or 2 + N(0,1)
// (values of one sign, where truncation in P·V adds up), uploads them as
// float32 device tensors and calls Device.Attention with FP8 precision
// (quantized inside the call, one scale per batch and head). Errors are
// relative L2 distances, computed as the peer computes them:
//
//	e_input   float64 attention on the quantized inputs against exact
//	          (float64) attention on the float32 inputs: quantization alone;
//	e_ours    our output against exact attention;
//	ratio     e_ours / e_input, what TestFP8PAccuracy in backend/cuda bounds
//	          (1.3 on N(0,1), 1.5 on values of one sign);
//	e_kernel  our output against float64 attention on the quantized inputs.

// accuracyCase is one case of the accuracy mode.
type accuracyCase struct {
	name  string
	shape backend.Shape
	mask  backend.Mask
	shift float64 // added to every value of V
	limit float64 // TestFP8PAccuracy's bound on the ratio
	what  string
}

// accuracyCases are the cuDNN FP8 peer's cases A-D (its causal mask is
// top-left: CausalUpperLeft).
var accuracyCases = []accuracyCase{
	{"A", backend.Shape{B: 1, Hq: 4, Hkv: 4, Sq: 256, Sk: 4096, D: 128}, backend.NoMask, 0, 1.3, "mask=none V=N(0,1)"},
	{"B", backend.Shape{B: 1, Hq: 4, Hkv: 4, Sq: 256, Sk: 4096, D: 128}, backend.NoMask, 2, 1.5, "mask=none V=2+N(0,1)"},
	{"C", backend.Shape{B: 1, Hq: 4, Hkv: 4, Sq: 256, Sk: 1024, D: 64}, backend.NoMask, 2, 1.5, "mask=none V=2+N(0,1)"},
	{"D", backend.Shape{B: 1, Hq: 4, Hkv: 4, Sq: 256, Sk: 4096, D: 128}, backend.CausalUpperLeft, 2, 1.5, "mask=causal(top-left) V=2+N(0,1)"},
}

// accuracyLegend explains the ACCURACY lines.
const accuracyLegend = "accuracy: Device.Attention on float32 device tensors with FP8 precision (one E4M3 scale per batch and head);\n" +
	"  relative L2 errors: e_input = float64 attention on the quantized inputs vs exact attention on the float32 inputs,\n" +
	"  e_ours = ours vs exact, ratio = e_ours/e_input (TestFP8PAccuracy's bound: 1.3 on N(0,1), 1.5 on values of one sign),\n" +
	"  e_kernel = ours vs float64 attention on the quantized inputs.\n"

// runAccuracy runs cases on the device named name ("" the best available)
// and writes one ACCURACY line each (FAILED and the error for a case the
// call refuses). ok is false if a case failed or its ratio is beyond its
// limit or not a number; err is an error of opening the device.
func (c config) runAccuracy(w io.Writer, name string, cases []accuracyCase) (ok bool, err error) {
	dev, err := sdpa.Open(name)
	if err != nil {
		return false, err
	}
	seed := sdpatest.Seed()
	fmt.Fprintf(w, "%sdevice %s, seed %d\n", accuracyLegend, dev.Name(), seed)
	ok = true
	for i, ac := range cases {
		s := ac.shape
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		in := sdpatest.RandomInputs(rng, s, 1)
		for j := range in.V {
			in.V[j] += float32(ac.shift)
		}
		scale := float32(1 / math.Sqrt(float64(s.D)))
		e, _, _ := sdpatest.NewProblem(s, in, scale, ac.mask, backend.FP32)
		p, _, _ := sdpatest.NewProblem(s, in, scale, ac.mask, backend.FP8E4M3)
		var exact []float64
		var wg sync.WaitGroup // the two oracles side by side
		wg.Go(func() { exact, _ = oracle.Naive(e) })
		quant, _ := oracle.Naive(p)
		wg.Wait()
		got, err := c.publicOnce(dev, s, in, &sdpa.Options{Scale: scale, Mask: ac.mask, Precision: backend.FP8E4M3})
		if err != nil { // the other cases still run
			fmt.Fprintf(w, "FAILED %s: %v\n", ac.name, err)
			ok = false
			continue
		}
		rel := func(x []float32, ref []float64) float64 {
			return sdpatest.Compare(x, ref, sdpatest.Tolerance{Atol: math.Inf(1)}).RelL2
		}
		eInput := sdpatest.Compare(quant, exact, sdpatest.Tolerance{Atol: math.Inf(1)}).RelL2
		eOurs, eKernel := rel(got, exact), rel(got, quant)
		ratio := eOurs / eInput
		verdict := "PASS"
		if !(ratio <= ac.limit) {
			verdict, ok = "FAIL", false
		}
		fmt.Fprintf(w, "ACCURACY %s e_input=%.4e e_ours=%.4e ratio=%.3f e_kernel=%.4e %s(limit %.1f) | shape=%dx%dx%dx%dx%d %s | backend=%s\n",
			ac.name, eInput, eOurs, ratio, eKernel, verdict, ac.limit, s.B, s.Hq, s.Sq, s.Sk, s.D, ac.what, dev.Name())
	}
	return ok, nil
}

// publicOnce runs one Device.Attention on float32 device tensors holding in
// (BHSD) and returns the output.
func (c config) publicOnce(dev *sdpa.Device, s backend.Shape, in sdpatest.Inputs, o *sdpa.Options) (got []float32, err error) {
	var free []*sdpa.DeviceTensor
	defer func() {
		for _, t := range free {
			err = errors.Join(err, t.Free())
		}
	}()
	var ts [3]*sdpa.DeviceTensor
	for i, x := range []struct {
		data []float32
		h, n int
	}{{in.Q, s.Hq, s.Sq}, {in.K, s.Hkv, s.Sk}, {in.V, s.Hkv, s.Sk}} {
		if ts[i], err = dev.Upload(tensorIn(x.data, s.B, x.h, x.n, s.D, backend.BHSD)); err != nil {
			return nil, err
		}
		free = append(free, ts[i])
	}
	out, err := dev.NewTensor(s.B, s.Hq, s.Sq, s.D, sdpa.BHSD)
	if err != nil {
		return nil, err
	}
	free = append(free, out)
	attend := c.attend
	if attend == nil {
		attend = deviceAttention
	}
	if err := attend(dev, out, ts[0], ts[1], ts[2], o); err != nil {
		return nil, err
	}
	host := &sdpa.Tensor{Data: make([]float32, s.B*s.Hq*s.Sq*s.D), B: s.B, H: s.Hq, S: s.Sq, D: s.D}
	if err := out.Download(host); err != nil {
		return nil, err
	}
	return host.Data, nil
}
