package main

import (
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// doctored reads a cache back with one value of page 0, head 0, key 3
// changed (as a cache that lost a code would be read).
type doctored struct{ backend.PagedReader }

func (d doctored) ReadPage(page, head int, k, v []fp8.E4M3) (float32, float32, error) {
	ks, vs, err := d.PagedReader.ReadPage(page, head, k, v)
	if page == 0 && head == 0 {
		v[3*len(v)/decodePage] ^= 0x40
	}
	return ks, vs, err
}

// TestCheckDecode: the decode mode's check passes the cpu cache's result
// against its own pages, and fails it against a doctored read of them.
func TestCheckDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 1))
	const hkv, d, sk = 2, 64, 300
	per := (sk + decodePage - 1) / decodePage
	cfg := backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: decodePage, Pages: per}
	kv, err := cpu.New(2).NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &backend.PagedAppend{B: 1, N: sk, K: randNormal(rng, sk*hkv*d), V: randNormal(rng, sk*hkv*d)}
	table := make([]int32, per)
	for i := range table {
		table[i] = int32(per - 1 - i) // page 0 holds the last keys
	}
	for tk := range sk {
		a.Page, a.Slot = append(a.Page, table[tk/decodePage]), append(a.Slot, int32(tk%decodePage))
	}
	if err := kv.Append(a); err != nil {
		t.Fatal(err)
	}
	p := &backend.PagedProblem{B: 1, Hq: 8, Hkv: hkv, Sq: 2, D: d, Scale: 0.125, Mask: backend.CausalLowerRight,
		Q: randNormal(rng, 8*2*d), Out: make([]float32, 8*2*d), SeqLens: []int32{sk}, BlockTable: table, PagesPerSeq: per}
	if err := kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	r := kv.(backend.PagedReader)
	if st, tol, err := checkDecode(r, p, cfg); err != nil || st.Beyond > 0 {
		t.Fatalf("the cache's own result: %d beyond %s (%v)", st.Beyond, tol.Why, err)
	}
	if st, _, err := checkDecode(doctored{r}, p, cfg); err != nil || st.Beyond == 0 {
		t.Fatalf("a doctored page passed (%v)", err)
	}
}

// TestCheckDecodeRagged: the check holds each sequence of a batch of
// different lengths to its own oracle: it passes the cpu cache's result,
// and fails it where a page of the second sequence is doctored (page 0 is
// that sequence's) or where the outputs of two sequences are swapped.
func TestCheckDecodeRagged(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 2))
	const hkv, hq, d, sq = 2, 4, 64, 1
	lens := []int32{150, 70, 129}
	per := 3
	cfg := backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: decodePage, Pages: len(lens) * per}
	kv, err := cpu.New(2).NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	table := make([]int32, len(lens)*per)
	for i := range table {
		table[i] = int32((i + 2*per) % len(table)) // sequence 1's first page is page 0
	}
	for b, n := range lens {
		a := &backend.PagedAppend{B: 1, N: int(n), K: randNormal(rng, int(n)*hkv*d), V: randNormal(rng, int(n)*hkv*d)}
		for tk := range int(n) {
			a.Page, a.Slot = append(a.Page, table[b*per+tk/decodePage]), append(a.Slot, int32(tk%decodePage))
		}
		if err := kv.Append(a); err != nil {
			t.Fatal(err)
		}
	}
	rows := hq * sq * d
	p := &backend.PagedProblem{B: len(lens), Hq: hq, Hkv: hkv, Sq: sq, D: d, Scale: 0.125, Mask: backend.CausalLowerRight,
		Q: randNormal(rng, len(lens)*rows), Out: make([]float32, len(lens)*rows), SeqLens: lens, BlockTable: table, PagesPerSeq: per}
	if err := kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	r := kv.(backend.PagedReader)
	if st, tol, err := checkDecode(r, p, cfg); err != nil || st.Beyond > 0 || st.N != len(p.Out) {
		t.Fatalf("the cache's own result: %d of %d beyond %s (%v)", st.Beyond, st.N, tol.Why, err)
	}
	if st, _, err := checkDecode(doctored{r}, p, cfg); err != nil || st.Beyond == 0 || st.FirstBad < rows || st.FirstBad >= 2*rows {
		t.Fatalf("a doctored page of sequence 1 gave %d beyond, the first at %d (%v)", st.Beyond, st.FirstBad, err)
	}
	for i := range rows { // sequences 0 and 2 swapped
		p.Out[i], p.Out[2*rows+i] = p.Out[2*rows+i], p.Out[i]
	}
	if st, _, err := checkDecode(r, p, cfg); err != nil || st.Beyond == 0 {
		t.Fatalf("swapped sequences passed (%v)", err)
	}
}

// TestRunDecodeRagged: the decode mode with -ragged on the cpu backend
// validates and times a batch of drawn lengths.
func TestRunDecodeRagged(t *testing.T) {
	c := config{backend: "cpu", iters: 2, check: true, ragged: true}
	r, err := c.runDecode("test", backend.Shape{B: 3, Hq: 4, Hkv: 2, Sq: 1, Sk: 200, D: 64})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Pass || r.Iters != 2 || !(r.P50us > 0) {
		t.Fatalf("result %+v", r)
	}
	// More new tokens than a sequence may hold: an error, not lengths past
	// the sequences' pages.
	if _, err := c.runDecode("test", backend.Shape{B: 2, Hq: 4, Hkv: 2, Sq: 9, Sk: 8, D: 64}); err == nil {
		t.Fatal("-ragged with Sq > Sk ran")
	}
}
