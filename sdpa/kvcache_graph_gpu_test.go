//go:build cuda

package sdpa_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// tableCopies returns the host-to-device copies the cuda backend's paged
// tables have issued so far (its diagnostic counter).
func tableCopies(t *testing.T) int64 {
	t.Helper()
	be, err := backend.Lookup("cuda")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := be.(interface{ PagedTableCopies() int64 })
	if !ok {
		t.Fatal("the cuda backend does not count its table copies")
	}
	return c.PagedTableCopies()
}

// TestKVCacheGraphDecodeGPU: a decode step over a KVCache captured once on
// "cuda" and replayed after every change to its sequences (tokens appended
// one at a time across page boundaries and as a chunk, a truncation that
// drops a page, a truncation under a fork whose shared page the next
// append copies) gives at every step the float64 oracle's result on the
// values the cache holds (a cpu paged storage fed the same tokens in the
// same order holds the same codes and scales), within the float32 tiers,
// outputs poisoned before every replay. A replay copies nothing from the
// host; a change copies the lengths, and the block-table entries where a
// sequence's pages changed (two copies), and a fork of a sequence copies
// nothing.
func TestKVCacheGraphDecodeGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 0x6A7))
	const hq, hkv, d, P, maxLen, steps = 8, 2, 128, 64, 512, 70
	prefill := []int{50, 130, 1, 64}
	B, per := len(prefill), maxLen/P
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 8192, PageSize: P, MaxSeqLen: maxLen})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	// The reference storage: sequence b in pages b·per onwards.
	cfg := backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: P, Pages: B * per}
	ref, err := cpu.New(1).NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	lens, table := make([]int32, B), make([]int32, B*per)
	for i := range table {
		table[i] = int32(i)
	}
	ids := make([]sdpa.SeqID, B)
	for i := range ids {
		ids[i], _ = cache.AddSequence()
	}
	// appendAll appends n[b] tokens to sequence ids[b] (for b in which)
	// in both caches.
	appendAll := func(which []int, n int) {
		t.Helper()
		k, v := randLayout(rng, len(which), hkv, n, d, sdpa.BHSD), randLayout(rng, len(which), hkv, n, d, sdpa.BHSD)
		sel := make([]sdpa.SeqID, len(which))
		for i, b := range which {
			sel[i] = ids[b]
			row := hkv * n * d
			a := &backend.PagedAppend{B: 1, N: n, K: k.Data[i*row : (i+1)*row], V: v.Data[i*row : (i+1)*row]}
			for tk := int(lens[b]); tk < int(lens[b])+n; tk++ {
				a.Page, a.Slot = append(a.Page, table[b*per+tk/P]), append(a.Slot, int32(tk%P))
			}
			if err := ref.Append(a); err != nil {
				t.Fatal(err)
			}
			lens[b] += int32(n)
		}
		kd, vd := upload(t, dev, k), upload(t, dev, v)
		if err := errors.Join(cache.Append(sel, kd, vd), kd.Free(), vd.Free()); err != nil {
			t.Fatal(err)
		}
	}
	for b, n := range prefill {
		appendAll([]int{b}, n)
	}
	all := []int{0, 1, 2, 3}
	q, _ := dev.NewTensor(B, hq, 1, d, sdpa.BHSD)
	out, _ := dev.NewTensor(B, hq, 1, d, sdpa.BHSD)
	lse, _ := dev.NewTensor(B, hq, 1, 1, sdpa.BHSD)
	opts := &sdpa.Options{Mask: sdpa.CausalLowerRight}
	g, err := dev.Capture(func() error { return cache.Attention(out, lse, q, ids, opts) })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// copies runs f and checks the table copies it issued.
	copies := func(what string, want int64, f func() error) {
		t.Helper()
		before := tableCopies(t)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if n := tableCopies(t) - before; n != want {
			t.Fatalf("%s issued %d table copies, want %d", what, n, want)
		}
	}
	for step := range steps {
		if step == 0 {
			var child sdpa.SeqID
			copies("a fork", 0, func() (err error) { child, err = cache.Fork(ids[3]); return err })
			copies("a truncation within a page", 1, func() error { return cache.Truncate(ids[3], 40) })
			copies("a truncation that drops a page", 2, func() error { return cache.Truncate(ids[1], 100) })
			lens[3], lens[1] = 40, 100
			defer cache.Drop(child)
		}
		n := 1
		if step == steps/2 {
			n = 5
		}
		want := int64(1)
		for _, b := range all {
			if step == 0 && b == 3 || (int(lens[b])+n+P-1)/P > (int(lens[b])+P-1)/P { // a copied page, a new page
				want = 2
			}
		}
		copies("an append", want, func() error { appendAll(all, n); return nil })
		hostQ := randLayout(rng, B, hq, 1, d, sdpa.BHSD)
		fill(t, q, hostQ)
		fill(t, out, nil)
		fill(t, lse, nil)
		copies("a replay", 0, g.Replay)
		got, gotLSE := download(t, out), download(t, lse)
		hp := &backend.PagedProblem{B: B, Hq: hq, Hkv: hkv, Sq: 1, D: d, Scale: float32(1 / math.Sqrt(d)), Mask: backend.CausalLowerRight,
			SeqLens: lens, BlockTable: table, PagesPerSeq: per, Q: hostQ.Data, Out: make([]float32, len(hostQ.Data))}
		for b := range B {
			dp, err := sdpatest.PagedSequence(ref.(backend.PagedReader), hp, cfg, b)
			if err != nil {
				t.Fatal(err)
			}
			wo, wl := oracle.Naive(dp)
			tol, lt := sdpatest.FP32Tolerance(dp), sdpatest.LSETolerance(dp)
			st := sdpatest.Compare(got.Data[b*hq*d:(b+1)*hq*d], wo, tol)
			lst := sdpatest.Compare(gotLSE.Data[b*hq:(b+1)*hq], wl, lt)
			if st.Beyond+lst.Beyond > 0 || math.IsNaN(st.MaxErr) || math.IsNaN(lst.MaxErr) {
				t.Fatalf("step %d, sequence %d of %d tokens: %d of %d outputs beyond %s (max error %.3g), %d LSE beyond %s",
					step, b, lens[b], st.Beyond, hq*d, tol.Why, st.MaxErr, lst.Beyond, lt.Why)
			}
		}
	}
	if err := cache.Drop(ids[2]); err != nil {
		t.Fatal(err)
	}
	if err := g.Replay(); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("replay over a dropped sequence: %v, want ErrInvalid", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*sdpa.DeviceTensor{q, out, lse} {
		if err := x.Free(); err != nil {
			t.Fatal(err)
		}
	}
}
