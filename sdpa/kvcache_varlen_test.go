package sdpa_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// varlenAgainstAlone runs the varlen call of q (packed queries
// [1][Hq][T][D]) on cache c and holds each sequence's output rows and
// log-sum-exps to what the sequence gets alone with the same options:
// within 2^-16 (relative L2). Alone is through Attention, or where
// aloneVarlen through a varlen call of that sequence only.
func varlenAgainstAlone(t *testing.T, dev *sdpa.Device, c *sdpa.KVCache, ids []sdpa.SeqID, queries []int, q *sdpa.Tensor, opts *sdpa.Options,
	aloneVarlen bool) {
	t.Helper()
	hq, total, d, layout := q.H, q.S, q.D, q.Layout
	out, _ := dev.NewTensor(1, hq, total, d, layout)
	lse, _ := dev.NewTensor(1, hq, total, 1, sdpa.BHSD)
	if err := c.AttentionVarlen(out, lse, upload(t, dev, q), ids, queries, opts); err != nil {
		t.Fatal(err)
	}
	all := &sdpa.Tensor{Data: make([]float32, len(q.Data)), B: 1, H: hq, S: total, D: d, Layout: layout}
	allLSE := &sdpa.Tensor{Data: make([]float32, hq*total), B: 1, H: hq, S: total, D: 1}
	if err := errors.Join(out.Download(all), lse.Download(allLSE)); err != nil {
		t.Fatal(err)
	}
	from := 0
	for b, id := range ids {
		n := queries[b]
		if n == 0 {
			continue
		}
		ob, _ := dev.NewTensor(1, hq, n, d, layout)
		lb, _ := dev.NewTensor(1, hq, n, 1, sdpa.BHSD)
		alone := c.Attention
		if aloneVarlen {
			alone = func(out, lse, q *sdpa.DeviceTensor, ids []sdpa.SeqID, opts *sdpa.Options) error {
				return c.AttentionVarlen(out, lse, q, ids, []int{n}, opts)
			}
		}
		if err := alone(ob, lb, upload(t, dev, rows(q, from, from+n)), []sdpa.SeqID{id}, opts); err != nil {
			t.Fatal(err)
		}
		one := &sdpa.Tensor{Data: make([]float32, hq*n*d), B: 1, H: hq, S: n, D: d, Layout: layout}
		oneLSE := &sdpa.Tensor{Data: make([]float32, hq*n), B: 1, H: hq, S: n, D: 1}
		if err := errors.Join(ob.Download(one), lb.Download(oneLSE)); err != nil {
			t.Fatal(err)
		}
		if e := relL2(rows(all, from, from+n).Data, one.Data); !(e <= 0x1p-16) {
			t.Errorf("sequence %d (%d queries): output %.3g from alone (relative L2; at most 2^-16)", b, n, e)
		}
		if e := relL2(rows(allLSE, from, from+n).Data, oneLSE.Data); !(e <= 0x1p-16) {
			t.Errorf("sequence %d (%d queries): LSE %.3g from alone (relative L2; at most 2^-16)", b, n, e)
		}
		from += n
	}
}

// TestKVCacheVarlen: a varlen batch on the cpu device (varlenCheck).
func TestKVCacheVarlen(t *testing.T) {
	dev, err := sdpa.Open("cpu/go")
	if err != nil {
		t.Fatal(err)
	}
	varlenCheck(t, dev)
}

// varlenCheck runs a varlen batch (chunks beside single decode tokens, a
// sequence with no queries, one long enough to split its keys) on dev, in
// both layouts and with and without a causal mask, and holds each
// sequence's output rows and log-sum-exps to what the sequence gets alone
// through Attention: within 2^-16 relative (L2), as two float32-tier
// results (the batch may split a sequence's keys where the sequence alone
// does not, or run another kernel; the backends' conformance suites hold
// the batch to the oracle itself). The query rows and the output's come
// packed in order, and the rows of the sequence without queries belong to
// the next one. Then the calls the counts make invalid, and a capture.
func varlenCheck(t *testing.T, dev *sdpa.Device) {
	t.Helper()
	seed := sdpatest.Seed()
	t.Logf("seed %d (set FP8ATTN_SEED to reproduce)", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	const hkv, g, d = 2, 2, 64 // (a head dim the cuda device's paged kernels have)
	hq := hkv * g
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	lens := []int{70, 3, 2000, 9, 1300}
	queries := []int{17, 1, 0, 9, 1}
	var ids []sdpa.SeqID
	for _, n := range lens {
		id, _ := c.AddSequence()
		ids = append(ids, id)
		if err := c.Append([]sdpa.SeqID{id}, upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD))); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, n := range queries {
		total += n
	}
	for _, layout := range []sdpa.Layout{sdpa.BHSD, sdpa.BSHD} {
		for _, mask := range []sdpa.Mask{sdpa.CausalLowerRight, sdpa.NoMask} {
			t.Run(fmt.Sprintf("%v/%v", layout, mask), func(t *testing.T) {
				varlenAgainstAlone(t, dev, c, ids, queries, randLayout(rng, 1, hq, total, d, layout), &sdpa.Options{Mask: mask}, false)
			})
		}
	}

	// Errors: what Attention refuses, and the counts' own.
	q := upload(t, dev, randLayout(rng, 1, hq, total, d, sdpa.BHSD))
	out, _ := dev.NewTensor(1, hq, total, d, sdpa.BHSD)
	two, _ := dev.NewTensor(2, hq, total, d, sdpa.BHSD)
	shortLSE, _ := dev.NewTensor(1, hq, total-1, 1, sdpa.BHSD)
	for _, tc := range []struct {
		name    string
		err     error
		out     *sdpa.DeviceTensor
		lse     *sdpa.DeviceTensor
		q       *sdpa.DeviceTensor
		queries []int
	}{
		{"counts short", sdpa.ErrInvalid, out, nil, q, queries[:4]},
		{"counts nil", sdpa.ErrInvalid, out, nil, q, nil},
		{"negative count", sdpa.ErrInvalid, out, nil, q, []int{18, 1, -1, 9, 1}},
		{"q of two batch entries", sdpa.ErrInvalid, two, nil, two, []int{17, 1, 0, 9, 1}},
		{"counts past q", sdpa.ErrInvalid, out, nil, q, []int{17, 1, 1, 9, 1}},
		{"counts short of q", sdpa.ErrInvalid, out, nil, q, []int{16, 1, 0, 9, 1}},
		{"more queries than tokens", sdpa.ErrInvalid, out, nil, q, []int{13, 4, 0, 10, 1}},
		{"lse of the wrong rows", sdpa.ErrInvalid, out, shortLSE, q, queries},
		{"nil q", sdpa.ErrInvalid, out, nil, nil, queries},
	} {
		if err := c.AttentionVarlen(tc.out, tc.lse, tc.q, ids, tc.queries, nil); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	var nilCache *sdpa.KVCache
	if err := nilCache.AttentionVarlen(out, nil, q, ids, queries, nil); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("nil cache: %v, want ErrInvalid", err)
	}
	g2, err := dev.Capture(func() error { return c.AttentionVarlen(out, nil, q, ids, queries, nil) })
	if !errors.Is(err, sdpa.ErrUnsupported) {
		t.Errorf("captured: %v, want ErrUnsupported", err)
	}
	if g2 != nil {
		g2.Close()
	}
}
