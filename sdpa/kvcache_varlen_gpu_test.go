//go:build cuda

package sdpa_test

import (
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestKVCacheVarlenGPU: a varlen batch on the cuda device (varlenCheck),
// which runs it on the cp.async kernel in one launch where a sequence alone
// may run the warp-specialized one.
func TestKVCacheVarlenGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Skipf("no cuda device: %v", err)
	}
	varlenCheck(t, dev)
}

// TestKVCacheVarlenFP8GPU: a varlen batch with Precision FP8E4M3 on the
// cuda device, chunks of 512 and 300 new queries beside decode tokens (Hq32
// Hkv8 D128, as a serving step), in both layouts: each sequence's rows and
// log-sum-exps within 2^-16 (relative L2) of what the sequence gets in a
// varlen call of its own. By default its chunks run on the FP8 prefill
// kernel and its decode tokens as FP32, in the batch and alone; where the
// packed form runs (Hopper, FP8ATTN_PACKED=1 in a kerneldev build) the
// step is one launch whose rows each keep their own scale and whose tiles
// theirs, so a sequence's rows are the same in any batch. (A sequence through Attention runs other kernels
// at other scales, about 2^-7 apart; the backend's tests hold each to the
// float64 oracle.)
func TestKVCacheVarlenFP8GPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Skipf("no cuda device: %v", err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (set FP8ATTN_SEED to reproduce)", seed)
	rng := rand.New(rand.NewPCG(seed, 12))
	const hkv, g, d = 8, 4, 128
	hq := hkv * g
	lens := []int{1200, 1200, 700, 1300, 50}
	queries := []int{512, 300, 1, 0, 1}
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []sdpa.SeqID
	total := 0
	for i, n := range lens {
		id, _ := c.AddSequence()
		ids = append(ids, id)
		if err := c.Append([]sdpa.SeqID{id}, upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD))); err != nil {
			t.Fatal(err)
		}
		total += queries[i]
	}
	opts := &sdpa.Options{Mask: sdpa.CausalLowerRight, Precision: sdpa.FP8E4M3}
	for _, layout := range []sdpa.Layout{sdpa.BHSD, sdpa.BSHD} {
		t.Run(layout.String(), func(t *testing.T) {
			varlenAgainstAlone(t, dev, c, ids, queries, randLayout(rng, 1, hq, total, d, layout), opts, true)
		})
	}
}
