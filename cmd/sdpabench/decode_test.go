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
