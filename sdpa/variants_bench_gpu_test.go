//go:build cuda

package sdpa_test

import (
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// BenchmarkVariantsGPU times the attention variants through the public
// call, Device.Attention on FP8 device tensors captured in a graph and
// replayed (replayTimer, as BenchmarkPublicPrefillGPU), each beside the call it is
// measured against, in one process: a window of 1024 against the causal
// call (its variant row also reports the fraction of the causal call's key
// tiles the window leaves the Hopper kernel, tile-fraction), Gemma 2's
// softcap against the same windowed call without it, and gpt-oss's sinks
// and window of 128 against the plain causal call.
func BenchmarkVariantsGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 57))
	rt := newReplayTimer(b, dev)
	type call struct {
		name string
		opts sdpa.Options
	}
	for _, cs := range []struct {
		name  string
		shape backend.Shape
		calls [2]call // the baseline, then the variant
	}{
		{"window1024", backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, [2]call{
			{"causal", sdpa.Options{Mask: sdpa.CausalLowerRight}},
			{"window", sdpa.Options{Mask: sdpa.CausalLowerRight, SlidingWindow: 1024}}}},
		{"gemma2", backend.Shape{B: 1, Hq: 16, Hkv: 8, Sq: 8192, Sk: 8192, D: 256}, [2]call{
			{"window", sdpa.Options{Mask: sdpa.CausalLowerRight, SlidingWindow: 4096}},
			{"window-softcap50", sdpa.Options{Mask: sdpa.CausalLowerRight, SlidingWindow: 4096, Softcap: 50}}}},
		{"gpt-oss", backend.Shape{B: 1, Hq: 64, Hkv: 8, Sq: 4096, Sk: 4096, D: 64}, [2]call{
			{"causal", sdpa.Options{Mask: sdpa.CausalLowerRight}},
			{"sinks-window128", sdpa.Options{Mask: sdpa.CausalLowerRight, SlidingWindow: 128, Sinks: make([]float32, 64)}}}},
	} {
		s := cs.shape
		in := sdpatest.RandomInputs(rng, s, 1)
		var fp8 [3]*sdpa.DeviceTensor
		for i, x := range []struct {
			data []float32
			h, n int
		}{{in.Q, s.Hq, s.Sq}, {in.K, s.Hkv, s.Sk}, {in.V, s.Hkv, s.Sk}} {
			t, err := dev.Upload(&sdpa.Tensor{Data: x.data, B: s.B, H: x.h, S: x.n, D: s.D})
			if err != nil {
				b.Fatal(err)
			}
			if fp8[i], err = dev.Quantize(t); err != nil {
				b.Fatal(err)
			}
			if err := t.Free(); err != nil {
				b.Fatal(err)
			}
		}
		out, err := dev.NewTensor(s.B, s.Hq, s.Sq, s.D, sdpa.BHSD)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cs.calls {
			opts := c.opts
			opts.Precision = sdpa.FP8E4M3
			for i := range opts.Sinks {
				opts.Sinks[i] = float32(rng.NormFloat64())
			}
			b.Run(cs.name+"/"+c.name, func(b *testing.B) {
				us := rt.micros(b, func() error { return dev.Attention(out, nil, fp8[0], fp8[1], fp8[2], &opts) }, 10)
				b.ReportMetric(us, "us/call")
				if opts.SlidingWindow > 0 && c.opts.Softcap == 0 {
					b.ReportMetric(hopperTileFraction(s, opts.SlidingWindow), "tile-fraction")
				}
			})
		}
		for _, t := range append(fp8[:], out) {
			if err := t.Free(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// hopperTileFraction is the fraction of the key tiles of the lower-right
// causal call of shape s that the Hopper kernel's blocks load under a
// sliding window w (every block from the tile of its first row's first
// key to that of its last row's last).
func hopperTileFraction(s backend.Shape, w int) float64 {
	cfg, err := tiles.Hopper(s.D)
	if err != nil {
		return 0
	}
	var window, causal int
	for i0 := 0; i0 < s.Sq; i0 += cfg.BlockM {
		last := min(i0+cfg.BlockM, s.Sq) - 1
		hi := (last + s.Sk - s.Sq + 1 + cfg.BlockN - 1) / cfg.BlockN
		lo := max(0, i0+s.Sk-s.Sq-w+1) / cfg.BlockN
		window += hi - lo
		causal += hi
	}
	return float64(window) / float64(causal)
}

// BenchmarkVariantsDecodeGPU times a decode step through the cuda KVCache
// (KVCache.Attention captured in a graph and replayed, as
// BenchmarkVariantsGPU times its calls), B8 Hq64 Hkv8 D64 (gpt-oss's
// heads): over 128-token sequences, and over 32768-token ones under a
// sliding window of 128, which reads the pages inside the window only.
func BenchmarkVariantsDecodeGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	const B, hq, hkv, d, chunk = 8, 64, 8, 64, 128
	rng := rand.New(rand.NewPCG(1, 58))
	rt := newReplayTimer(b, dev)
	kc, vc := randTensor(rng, B, hkv, chunk, d), randTensor(rng, B, hkv, chunk, d)
	var kd, vd, q *sdpa.DeviceTensor
	for _, x := range []struct {
		dst **sdpa.DeviceTensor
		src *sdpa.Tensor
	}{{&kd, kc}, {&vd, vc}, {&q, randTensor(rng, B, hq, 1, d)}} {
		if *x.dst, err = dev.Upload(x.src); err != nil {
			b.Fatal(err)
		}
	}
	out, err := dev.NewTensor(B, hq, 1, d, sdpa.BHSD)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		tokens int
		window int
	}{
		{"Sk128", 128, 0},
		{"Sk32768-window128", 32768, 128},
	} {
		cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: B * c.tokens})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]sdpa.SeqID, B)
		for i := range ids {
			if ids[i], err = cache.AddSequence(); err != nil {
				b.Fatal(err)
			}
		}
		for range c.tokens / chunk { // the same chunk again: the step's time does not depend on the values
			if err := cache.Append(ids, kd, vd); err != nil {
				b.Fatal(err)
			}
		}
		opts := &sdpa.Options{Mask: sdpa.CausalLowerRight, SlidingWindow: c.window}
		b.Run(c.name, func(b *testing.B) {
			b.ReportMetric(rt.micros(b, func() error { return cache.Attention(out, nil, q, ids, opts) }, 50), "us/call")
		})
		if err := cache.Close(); err != nil {
			b.Fatal(err)
		}
	}
	for _, x := range []*sdpa.DeviceTensor{kd, vd, q, out} {
		if err := x.Free(); err != nil {
			b.Fatal(err)
		}
	}
}
