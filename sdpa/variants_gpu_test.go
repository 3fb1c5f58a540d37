//go:build cuda

package sdpa_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestKVCacheForkTruncateGPU and TestKVCacheForkGrowthGPU: the cuda cache's
// Fork, Truncate and copy-on-write (device-to-device page copies) held to
// the model, as on the cpu.
func TestKVCacheForkTruncateGPU(t *testing.T) { testForkTruncate(t, "cuda") }

func TestKVCacheForkGrowthGPU(t *testing.T) { testForkGrowth(t, "cuda") }

// TestVariantsGPU: the GPU kernels have no attention variants yet. On the
// cuda device, Attention and KVCache.Attention with one are ErrUnsupported,
// before anything is allocated; host calls with Backend "" run them
// elsewhere, and with Backend "cuda" are ErrUnsupported.
func TestVariantsGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 68))
	q, k, v := randTensor(rng, 1, 4, 33, 64), randTensor(rng, 1, 2, 70, 64), randTensor(rng, 1, 2, 70, 64)
	qd, kd, vd := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
	out, _ := dev.NewTensor(1, 4, 33, 64, sdpa.BHSD)
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 64, MaxTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, _ := c.AddSequence()
	if err := c.Append([]sdpa.SeqID{id}, kd, vd); err != nil {
		t.Fatal(err)
	}
	for _, vo := range variantOptions {
		opts := &sdpa.Options{Mask: vo.mask, Precision: sdpa.FP8E4M3, SlidingWindow: vo.window, Softcap: vo.softcap}
		if vo.sinks {
			opts.Sinks = []float32{1, 2, 3, 4}
		}
		held := dev.MemoryHeld()
		if err := dev.Attention(out, nil, qd, kd, vd, opts); !errors.Is(err, sdpa.ErrUnsupported) {
			t.Errorf("%s: Device.Attention: %v, want ErrUnsupported", vo.name, err)
		}
		if got := dev.MemoryHeld(); got != held {
			t.Errorf("%s: the refused call left %d bytes held, %d before", vo.name, got, held)
		}
		co := *opts
		if co.Mask == sdpa.CausalUpperLeft {
			co.Mask = sdpa.CausalLowerRight
		}
		if err := c.Attention(out, nil, qd, []sdpa.SeqID{id}, &co); !errors.Is(err, sdpa.ErrUnsupported) {
			t.Errorf("%s: KVCache.Attention: %v, want ErrUnsupported", vo.name, err)
		}
		host := *opts
		if _, err := sdpa.Attention(q, k, v, &host); err != nil {
			t.Errorf("%s: Backend \"\": %v", vo.name, err)
		}
		host.Backend = "cuda"
		if _, err := sdpa.Attention(q, k, v, &host); !errors.Is(err, sdpa.ErrUnsupported) {
			t.Errorf("%s: Backend cuda: %v, want ErrUnsupported", vo.name, err)
		}
	}
}
