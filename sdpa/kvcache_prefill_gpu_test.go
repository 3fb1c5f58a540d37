//go:build cuda

package sdpa_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/sdpa"
)

// BenchmarkKVCachePrefillGPU: a chunk of new tokens attended through the
// KVCache after 8192 cached ones (B1 Hq32 Hkv8 D128, lower-right causal,
// queries and outputs in GPU memory), beside the contiguous public call of
// the same shape, all issued call by call and host-timed: an iteration is
// reps calls back to back and the wait for the last (a download of a
// one-row tensor ordered behind them). "cache-fp32" is the default
// precision (float32 queries: the split-KV kernel), "cache-fp8" FP8E4M3
// (the prefill kernel over the gathered cache, where the chunk has enough
// rows); "dense-fp8" is Device.Attention on FP8 tensors of the same
// values (quantized once beforehand), "dense-fp32in" the same on the
// float32 tensors with FP8 precision (quantized by the call).
func BenchmarkKVCachePrefillGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	const hq, hkv, cached, d = 32, 8, 8192, 128
	for _, sq := range []int{2048, 512, 128, 32} {
		n := cached + sq
		rng := rand.New(rand.NewPCG(uint64(sq), 7))
		cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: n})
		if err != nil {
			b.Fatal(err)
		}
		seq, _ := cache.AddSequence()
		k, err1 := dev.Upload(randLayout(rng, 1, hkv, n, d, sdpa.BHSD))
		v, err2 := dev.Upload(randLayout(rng, 1, hkv, n, d, sdpa.BHSD))
		q, err3 := dev.Upload(randLayout(rng, 1, hq, sq, d, sdpa.BHSD))
		out, err4 := dev.NewTensor(1, hq, sq, d, sdpa.BHSD)
		wait, err5 := dev.NewTensor(1, 1, 1, 1, sdpa.BHSD)
		if err := errors.Join(err1, err2, err3, err4, err5, cache.Append([]sdpa.SeqID{seq}, k, v)); err != nil {
			b.Fatal(err)
		}
		q8, err1 := dev.Quantize(q)
		k8, err2 := dev.Quantize(k)
		v8, err3 := dev.Quantize(v)
		if err := errors.Join(err1, err2, err3); err != nil {
			b.Fatal(err)
		}
		ids := []sdpa.SeqID{seq}
		fp32 := &sdpa.Options{Mask: sdpa.CausalLowerRight}
		fp8 := &sdpa.Options{Mask: sdpa.CausalLowerRight, Precision: sdpa.FP8E4M3}
		reps := max(1, 20*2048/sq)
		for _, c := range []struct {
			name string
			call func() error
		}{
			{"cache-fp32", func() error { return cache.Attention(out, nil, q, ids, fp32) }},
			{"cache-fp8", func() error { return cache.Attention(out, nil, q, ids, fp8) }},
			{"dense-fp8", func() error { return dev.Attention(out, nil, q8, k8, v8, fp8) }},
			{"dense-fp32in", func() error { return dev.Attention(out, nil, q, k, v, fp8) }},
		} {
			b.Run(fmt.Sprintf("new%d/%s", sq, c.name), func(b *testing.B) { hostTimedCalls(b, reps, wait, c.call) })
		}
		for _, t := range []*sdpa.DeviceTensor{k, v, q, out, wait, q8, k8, v8} {
			if err := t.Free(); err != nil {
				b.Fatal(err)
			}
		}
		if err := cache.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// hostTimedCalls reports the host time a call takes, in µs: after two
// untimed calls, each iteration is reps calls back to back and the wait for
// the last (a download of wait, a small tensor ordered behind them).
func hostTimedCalls(b *testing.B, reps int, wait *sdpa.DeviceTensor, call func() error) {
	sink := &sdpa.Tensor{Data: make([]float32, 1), B: 1, H: 1, S: 1, D: 1}
	batch := func(n int) {
		for range n {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
		if err := wait.Download(sink); err != nil {
			b.Fatal(err)
		}
	}
	batch(2)
	var t time.Duration
	for b.Loop() {
		t0 := time.Now()
		batch(reps)
		t += time.Since(t0)
	}
	b.ReportMetric(float64(t.Nanoseconds())/1e3/float64(b.N*reps), "us/call")
}
