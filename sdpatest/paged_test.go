package sdpatest_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPagedSequence: a sequence read back from a cpu cache, in shuffled
// pages and the BSHD layout, is its queries in BHSD order and every key and
// value the E4M3 rounding of what was appended at its page's scale; empty,
// out-of-range and inconsistent requests are errors.
func TestPagedSequence(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 9))
	const hkv, hq, d, sq = 2, 4, 64, 3
	c := backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: 64, Pages: 5}
	kv, err := cpu.New(1).NewPagedKV(c)
	if err != nil {
		t.Fatal(err)
	}
	lens := []int{100, 0}
	table := []int32{4, 1, 0, 0} // sequence 0: pages 4 and 1
	n := lens[0]
	a := &backend.PagedAppend{B: 1, N: n, Layout: backend.BSHD, K: make([]float32, n*hkv*d), V: make([]float32, n*hkv*d)}
	for i := range a.K {
		a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for tk := range n {
		a.Page, a.Slot = append(a.Page, table[tk/64]), append(a.Slot, int32(tk%64))
	}
	if err := kv.Append(a); err != nil {
		t.Fatal(err)
	}
	p := &backend.PagedProblem{B: 2, Hq: hq, Hkv: hkv, Sq: sq, D: d, Scale: 0.125, Mask: backend.CausalLowerRight,
		Layout: backend.BSHD, Q: make([]float32, 2*hq*sq*d), Out: make([]float32, 2*hq*sq*d),
		SeqLens: []int32{int32(n), 0}, BlockTable: table, PagesPerSeq: 2}
	for i := range p.Q {
		p.Q[i] = float32(i)
	}
	r := kv.(backend.PagedReader)
	dp, err := sdpatest.PagedSequence(r, p, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dp.B != 1 || dp.Hq != hq || dp.Hkv != hkv || dp.Sq != sq || dp.Sk != n || dp.D != d || dp.Mask != p.Mask || dp.Scale != p.Scale {
		t.Fatalf("shape %+v, mask %v, scale %v", dp.Shape, dp.Mask, dp.Scale)
	}
	for h := range hq {
		for i := range sq {
			if got, want := dp.Q[(h*sq+i)*d], p.Q[p.Layout.Offset(0, h, i, hq, sq, d)]; got != want {
				t.Fatalf("Q head %d position %d: %v, want %v", h, i, got, want)
			}
		}
	}
	k8, v8 := make([]fp8.E4M3, 64*d), make([]fp8.E4M3, 64*d)
	for h := range hkv {
		for tk := range n {
			ks, vs, _ := r.ReadPage(int(table[tk/64]), h, k8, v8)
			for e := range d {
				src := (tk*hkv+h)*d + e // BSHD
				wantK := fp8.ToE4M3(a.K[src]/ks, fp8.SatFinite).Float32() * ks
				wantV := fp8.ToE4M3(a.V[src]/vs, fp8.SatFinite).Float32() * vs
				if got := dp.K[(h*n+tk)*d+e]; got != wantK {
					t.Fatalf("K head %d token %d dim %d: %v, want %v", h, tk, e, got, wantK)
				}
				if got := dp.V[(h*n+tk)*d+e]; got != wantV {
					t.Fatalf("V head %d token %d dim %d: %v, want %v", h, tk, e, got, wantV)
				}
			}
		}
	}
	for _, b := range []int{1, 2, -1} {
		if _, err := sdpatest.PagedSequence(r, p, c, b); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("sequence %d: %v, want ErrInvalid", b, err)
		}
	}
	bad := *p
	bad.BlockTable = table[:3]
	if _, err := sdpatest.PagedSequence(r, &bad, c, 0); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("short block table: %v, want ErrInvalid", err)
	}
}
