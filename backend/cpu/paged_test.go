package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPagedAttention runs the suite's paged-cache table on every kernel
// set, on one worker and on sixteen (which splits the keys of few blocks
// and merges the splits).
func TestPagedAttention(t *testing.T) {
	for _, isa := range cpu.ISAs() {
		for _, workers := range []int{1, 16} {
			t.Run(fmt.Sprintf("%s/workers=%d", isa, workers), func(t *testing.T) {
				be, err := cpu.NewISA(workers, isa)
				if err != nil {
					t.Fatal(err)
				}
				sdpatest.RunPaged(t, be)
			})
		}
	}
}

// TestPagedScalePolicy: tokens of growing and shrinking magnitude in one
// page. After every append, every token stored so far decodes within E4M3's
// rounding of its value: half an ulp (2^-4 relative) at its first encoding,
// plus, when the page's scale grew since, at most half the new scale's
// subnormal step (2^-10·s) each for the first encoding and the re-encoding.
// Scales are powers of two and never shrink; nothing saturates.
func TestPagedScalePolicy(t *testing.T) {
	const d, P = 16, 64
	be := cpu.New(1)
	kv, err := be.NewPagedKV(backend.PagedConfig{KVHeads: 1, HeadDim: d, PageSize: P, Pages: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 7))
	var rows [][]float32
	lastScale := float32(0)
	for tok, mag := range []float64{0, 1, 3, 40, 1e-3, 900, 1e5, 2, 1e-30, 5e5} {
		row := make([]float32, d)
		for i := range row {
			row[i] = float32(mag * rng.NormFloat64())
		}
		rows = append(rows, row)
		a := backend.PagedAppend{B: 1, N: 1, K: row, V: row, Page: []int32{1}, Slot: []int32{int32(tok)}}
		if err := kv.Append(&a); err != nil {
			t.Fatal(err)
		}
		k, v, ks, vs := cpu.PagedRows(kv, 1, 0)
		if ks != vs || ks < lastScale {
			t.Fatalf("token %d: scales %g, %g after %g", tok, ks, vs, lastScale)
		}
		if fr, _ := math.Frexp(float64(ks)); ks != 0 && fr != 0.5 {
			t.Fatalf("token %d: scale %g is not a power of two", tok, ks)
		}
		lastScale = ks
		for j, r := range rows {
			for i, x := range r {
				bound := math.Abs(float64(x))/16 + 2*float64(ks)/1024
				for _, got := range []float32{k[j*d+i], v[j*d+i]} {
					if e := math.Abs(float64(got) - float64(x)); !(e <= bound) {
						t.Fatalf("after token %d: token %d element %d decodes to %g, stored %g (error %g > %g, scale %g)", tok, j, i, got, x, e, bound, ks)
					}
				}
			}
		}
	}
}

// TestPagedAppendRefusesNonFinite: a NaN or Inf makes Append fail and
// leaves the cache as it was.
func TestPagedAppendRefusesNonFinite(t *testing.T) {
	const d = 8
	kv, err := cpu.New(1).NewPagedKV(backend.PagedConfig{KVHeads: 2, HeadDim: d, PageSize: 64, Pages: 1})
	if err != nil {
		t.Fatal(err)
	}
	good := make([]float32, 2*d)
	for i := range good {
		good[i] = float32(i)
	}
	if err := kv.Append(&backend.PagedAppend{B: 1, N: 1, K: good, V: good, Page: []int32{0}, Slot: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	k0, v0, _, _ := cpu.PagedRows(kv, 0, 1)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		row := slices.Clone(good)
		row[2*d-1] = bad
		for _, a := range []*backend.PagedAppend{
			{B: 1, N: 2, K: slices.Concat(good, row), V: slices.Concat(good, good), Page: []int32{0, 0}, Slot: []int32{1, 2}},
			{B: 1, N: 1, K: good, V: row, Page: []int32{0}, Slot: []int32{0}},
		} {
			if err := kv.Append(a); !errors.Is(err, backend.ErrInvalid) {
				t.Errorf("append of %v: %v, want ErrInvalid", bad, err)
			}
		}
	}
	k1, v1, _, _ := cpu.PagedRows(kv, 0, 1)
	if !slices.Equal(k0, k1) || !slices.Equal(v0, v1) {
		t.Error("a refused append changed the cache")
	}
}

// TestPagedValidate: bad appends and problems are errors, never panics.
func TestPagedValidate(t *testing.T) {
	cfg := backend.PagedConfig{KVHeads: 1, HeadDim: 4, PageSize: 64, Pages: 2}
	if _, err := cpu.New(1).NewPagedKV(backend.PagedConfig{KVHeads: 1, HeadDim: 4, PageSize: 16, Pages: 2}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("page size 16: %v, want ErrUnsupported", err)
	}
	kv, err := cpu.New(1).NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 4)
	for _, a := range []backend.PagedAppend{
		{B: 1, N: 1, K: row, V: row, Page: []int32{2}, Slot: []int32{0}},
		{B: 1, N: 1, K: row, V: row, Page: []int32{0}, Slot: []int32{64}},
		{B: 1, N: 1, K: row[:3], V: row, Page: []int32{0}, Slot: []int32{0}},
		{B: 1, N: 2, K: make([]float32, 8), V: make([]float32, 8), Page: []int32{0, 0}, Slot: []int32{3, 3}},
		{B: 0, N: 1},
	} {
		if err := kv.Append(&a); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("append %+v: %v, want ErrInvalid", a, err)
		}
	}
	good := func() *backend.PagedProblem {
		return &backend.PagedProblem{B: 1, Hq: 2, Hkv: 1, Sq: 1, D: 4, Scale: 1, Q: make([]float32, 8), Out: make([]float32, 8),
			SeqLens: []int32{3}, BlockTable: []int32{1}, PagesPerSeq: 1}
	}
	if err := kv.Attention(good()); err != nil {
		t.Fatal(err)
	}
	varlen := good()
	varlen.QStarts = []int32{0, 1}
	if err := kv.Attention(varlen); err != nil {
		t.Fatalf("a varlen batch of one: %v", err)
	}
	for name, mutate := range map[string]func(*backend.PagedProblem){
		"page out of pool":     func(p *backend.PagedProblem) { p.BlockTable[0] = 2 },
		"too long":             func(p *backend.PagedProblem) { p.SeqLens[0] = 65 },
		"negative length":      func(p *backend.PagedProblem) { p.SeqLens[0] = -1 },
		"upper-left mask":      func(p *backend.PagedProblem) { p.Mask = backend.CausalUpperLeft },
		"NaN scale":            func(p *backend.PagedProblem) { p.Scale = float32(math.NaN()) },
		"wrong head dim":       func(p *backend.PagedProblem) { p.D = 8 },
		"short out":            func(p *backend.PagedProblem) { p.Out = p.Out[:7] },
		"heads not a multiple": func(p *backend.PagedProblem) { p.Hq = 3 },
		"short LSE":            func(p *backend.PagedProblem) { p.LSE = make([]float32, 1) },
		"varlen offsets short": func(p *backend.PagedProblem) { p.QStarts = []int32{0} },
		"varlen not from 0":    func(p *backend.PagedProblem) { p.QStarts = []int32{1, 2} },
		"varlen decreasing": func(p *backend.PagedProblem) {
			p.B, p.Sq, p.SeqLens, p.BlockTable, p.QStarts = 2, 2, []int32{3, 3}, []int32{1, 1}, []int32{0, 2, 1}
		},
		"varlen Sq not the largest count": func(p *backend.PagedProblem) { p.QStarts, p.Sq = []int32{0, 1}, 2 },
		"varlen rows beyond Q":            func(p *backend.PagedProblem) { p.QStarts, p.Sq = []int32{0, 2}, 2 },
	} {
		p := good()
		mutate(p)
		if err := kv.Attention(p); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestPagedReadPage: ReadPage returns a block as rows of codes, each the
// E4M3 rounding of the appended row over the block's scale (the smallest
// power of two with amax <= 64·scale, set by the first token), and refuses
// out-of-range pages, heads and buffers.
func TestPagedReadPage(t *testing.T) {
	c := backend.PagedConfig{KVHeads: 2, HeadDim: 64, PageSize: 64, Pages: 3}
	kv, err := cpu.New(1).NewPagedKV(c)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 7))
	a := &backend.PagedAppend{B: 1, N: 5, Layout: backend.BSHD, K: make([]float32, 5*2*64), V: make([]float32, 5*2*64)}
	for i := range a.K {
		a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(3*rng.NormFloat64())
	}
	for s := range 5 {
		a.Page, a.Slot = append(a.Page, 2), append(a.Slot, int32(s))
	}
	if err := kv.Append(a); err != nil {
		t.Fatal(err)
	}
	r := kv.(backend.PagedReader)
	k, v := make([]fp8.E4M3, 64*64), make([]fp8.E4M3, 64*64)
	for h := range 2 {
		ks, vs, err := r.ReadPage(2, h, k, v)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range []struct {
			codes []fp8.E4M3
			src   []float32
			scale float32
		}{{k, a.K, ks}, {v, a.V, vs}} {
			first := x.src[h*64 : h*64+64] // token 0, head h (BSHD)
			if want := backend.PageScale(fp8.Amax(first)); x.scale != want {
				t.Fatalf("head %d %s: scale %g, want %g", h, [...]string{"K", "V"}[i], x.scale, want)
			}
			for s := range 5 {
				for d := range 64 {
					want := fp8.ToE4M3(x.src[(s*2+h)*64+d]/x.scale, fp8.SatFinite)
					if got := x.codes[s*64+d]; got != want {
						t.Fatalf("head %d %s slot %d dim %d: code %#x, want %#x", h, [...]string{"K", "V"}[i], s, d, got, want)
					}
				}
			}
		}
	}
	for _, bad := range []struct{ page, head, n int }{{3, 0, 4096}, {-1, 0, 4096}, {0, 2, 4096}, {0, 0, 4095}} {
		if _, _, err := r.ReadPage(bad.page, bad.head, make([]fp8.E4M3, bad.n), make([]fp8.E4M3, bad.n)); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("ReadPage(%d, %d) into %d codes: %v, want ErrInvalid", bad.page, bad.head, bad.n, err)
		}
	}
}
