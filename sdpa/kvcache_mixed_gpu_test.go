//go:build cuda

package sdpa_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
)

// BenchmarkKVCacheMixedGPU: a step of continuous batching through the
// KVCache, B·Hq32 Hkv8 D128, lower-right causal, queries and outputs in GPU
// memory: 4 sequences with 512 new tokens and 60 with one, after 4096 to
// 8191 cached tokens each. "mixed" is the whole step as one varlen call
// (AttentionVarlen: one launch), "mixed-fp8" the same with Precision
// FP8E4M3 (the chunks on the prefill kernel, the tokens on the split-KV
// kernel), "mixed-fp8-chunks" and "mixed-fp8-tokens" its two parts (the
// same varlen call with the other sequences' counts 0), "mixed-tokens"
// the tokens' part at FP32 (the split-KV kernel); "prefill" the 4
// chunks alone (Attention,
// B4 Sq512; "-fp8" with Precision FP8E4M3, which runs them on the prefill
// kernel on Hopper, each sequence bounded by its own length) and "decode"
// the 60 tokens alone (B60 Sq1). Issued call by call and host-timed
// (hostTimedCalls).
func BenchmarkKVCacheMixedGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	const hq, hkv, d, chunk, chunks, decodes = 32, 8, 128, 512, 4, 60
	var cached []int
	for i := range chunks {
		cached = append(cached, 4096+i*4095/(chunks-1))
	}
	for i := range decodes {
		cached = append(cached, 4096+i*4095/(decodes-1))
	}
	queries := make([]int, chunks+decodes)
	total, tokens := 0, 0
	for i := range queries {
		queries[i] = 1
		if i < chunks {
			queries[i] = chunk
		}
		total += queries[i]
		tokens += cached[i] + queries[i]
	}
	rng := rand.New(rand.NewPCG(1, 9))
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: tokens + 64*(chunks+decodes)})
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	longest := 8191 + chunk
	kAll, vAll := randLayout(rng, 1, hkv, longest, d, sdpa.BHSD), randLayout(rng, 1, hkv, longest, d, sdpa.BHSD)
	var ids []sdpa.SeqID
	for i := range queries {
		id, err := cache.AddSequence()
		if err != nil {
			b.Fatal(err)
		}
		n := cached[i] + queries[i]
		k, err1 := dev.Upload(rows(kAll, 0, n))
		v, err2 := dev.Upload(rows(vAll, 0, n))
		if err := errors.Join(err1, err2); err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(cache.Append([]sdpa.SeqID{id}, k, v), k.Free(), v.Free()); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	upload := func(bb, s int) (*sdpa.DeviceTensor, *sdpa.DeviceTensor) {
		q, err1 := dev.Upload(randLayout(rng, bb, hq, s, d, sdpa.BHSD))
		out, err2 := dev.NewTensor(bb, hq, s, d, sdpa.BHSD)
		if err := errors.Join(err1, err2); err != nil {
			b.Fatal(err)
		}
		return q, out
	}
	qM, outM := upload(1, total)
	// The varlen call with only the chunks' queries, and with only the
	// tokens' (the others' counts 0).
	chunkQueries, tokenQueries := make([]int, len(queries)), make([]int, len(queries))
	for i, n := range queries {
		if i < chunks {
			chunkQueries[i] = n
		} else {
			tokenQueries[i] = n
		}
	}
	qC, outC := upload(1, chunks*chunk)
	qT, outT := upload(1, decodes)
	qP, outP := upload(chunks, chunk)
	qD, outD := upload(decodes, 1)
	wait, err := dev.NewTensor(1, 1, 1, 1, sdpa.BHSD)
	if err != nil {
		b.Fatal(err)
	}
	fp32 := &sdpa.Options{Mask: sdpa.CausalLowerRight}
	fp8 := &sdpa.Options{Mask: sdpa.CausalLowerRight, Precision: sdpa.FP8E4M3}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"mixed", func() error { return cache.AttentionVarlen(outM, nil, qM, ids, queries, fp32) }},
		{"mixed-fp8", func() error { return cache.AttentionVarlen(outM, nil, qM, ids, queries, fp8) }},
		{"mixed-fp8-chunks", func() error { return cache.AttentionVarlen(outC, nil, qC, ids, chunkQueries, fp8) }},
		{"mixed-fp8-tokens", func() error { return cache.AttentionVarlen(outT, nil, qT, ids, tokenQueries, fp8) }},
		{"mixed-tokens", func() error { return cache.AttentionVarlen(outT, nil, qT, ids, tokenQueries, fp32) }},
		{"prefill", func() error { return cache.Attention(outP, nil, qP, ids[:chunks], fp32) }},
		{"prefill-fp8", func() error { return cache.Attention(outP, nil, qP, ids[:chunks], fp8) }},
		{"decode", func() error { return cache.Attention(outD, nil, qD, ids[chunks:], fp32) }},
	} {
		b.Run(c.name, func(b *testing.B) { hostTimedCalls(b, 10, wait, c.call) })
	}
	for _, t := range []*sdpa.DeviceTensor{qM, outM, qC, outC, qT, outT, qP, outP, qD, outD, wait} {
		if err := t.Free(); err != nil {
			b.Fatal(err)
		}
	}
}
