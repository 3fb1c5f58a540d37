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
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// pagedCase is one row of the paged-attention table.
type pagedCase struct {
	name          string
	hkv, group, d int
	pageSize, sq  int
	lens          []int // tokens per sequence (0: empty)
	mask          backend.Mask
	layout        backend.Layout
}

var pagedCases = []pagedCase{
	{"decode-gqa", 2, 4, 64, 64, 1, []int{300, 1, 64, 129}, backend.NoMask, backend.BHSD},
	{"decode-mha-d128", 3, 1, 128, 64, 1, []int{257}, backend.CausalLowerRight, backend.BSHD},
	{"chunk-lr", 2, 2, 64, 64, 7, []int{200, 7, 65}, backend.CausalLowerRight, backend.BHSD},
	{"chunk-longer-than-seq", 1, 4, 32, 64, 9, []int{5, 0, 70}, backend.CausalLowerRight, backend.BSHD},
	{"prefill-rows", 1, 2, 80, 128, 100, []int{100, 300}, backend.CausalLowerRight, backend.BHSD},
	{"decode-split", 2, 4, 64, 64, 1, []int{2000, 300, 0}, backend.CausalLowerRight, backend.BSHD},
	{"page128-nomask", 2, 2, 64, 128, 3, []int{511, 1000}, backend.NoMask, backend.BSHD},
}

// pagedFixture is a cache filled with random tokens of a case.
type pagedFixture struct {
	c      pagedCase
	kv     backend.PagedKV
	pages  [][]int32 // each sequence's pages, in order
	q      []float32
	layout backend.Layout
}

// newPagedFixture fills a cache (pages shuffled over the pool, tokens
// appended in random chunks, and one two-sequence append) with N(0,1)
// keys and values and draws the queries.
func newPagedFixture(t *testing.T, be *cpu.Backend, c pagedCase, rng *rand.Rand) *pagedFixture {
	t.Helper()
	P := c.pageSize
	total := 0
	for _, n := range c.lens {
		total += (n + P - 1) / P
	}
	cfg := backend.PagedConfig{KVHeads: c.hkv, HeadDim: c.d, PageSize: P, Pages: total + 3}
	kv, err := be.NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	perm := rng.Perm(cfg.Pages)
	f := &pagedFixture{c: c, kv: kv, layout: c.layout}
	next := 0
	for _, n := range c.lens {
		var pg []int32
		for range (n + P - 1) / P {
			pg = append(pg, int32(perm[next]))
			next++
		}
		f.pages = append(f.pages, pg)
	}
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	appendTokens := func(seqs []int, from, n int) {
		a := backend.PagedAppend{B: len(seqs), N: n, Layout: c.layout,
			K: randn(len(seqs) * n * c.hkv * c.d), V: randn(len(seqs) * n * c.hkv * c.d)}
		for _, s := range seqs {
			for t := from; t < from+n; t++ {
				a.Page = append(a.Page, f.pages[s][t/P])
				a.Slot = append(a.Slot, int32(t%P))
			}
		}
		if err := kv.Append(&a); err != nil {
			t.Fatal(err)
		}
	}
	done := make([]int, len(c.lens))
	if len(c.lens) >= 2 { // one batched append of two sequences
		n := min(c.lens[0], c.lens[1], 5)
		if n > 0 {
			appendTokens([]int{0, 1}, 0, n)
			done[0], done[1] = n, n
		}
	}
	for s, n := range c.lens {
		for done[s] < n {
			step := min(n-done[s], 1+rng.IntN(90))
			appendTokens([]int{s}, done[s], step)
			done[s] += step
		}
	}
	f.q = randn(len(c.lens) * c.hkv * c.group * c.sq * c.d)
	return f
}

// problem returns the paged problem of the fixture, with poisoned outputs
// in guards, and its block table (which the broken variant permutes).
func (f *pagedFixture) problem() (*backend.PagedProblem, *sdpatest.Guarded, *sdpatest.Guarded) {
	c := f.c
	per := 1
	for _, pg := range f.pages {
		per = max(per, len(pg))
	}
	p := &backend.PagedProblem{B: len(c.lens), Hq: c.hkv * c.group, Hkv: c.hkv, Sq: c.sq, D: c.d,
		Scale: float32(1 / math.Sqrt(float64(c.d))), Mask: c.mask, Layout: c.layout, Q: f.q, PagesPerSeq: per}
	for s, n := range c.lens {
		p.SeqLens = append(p.SeqLens, int32(n))
		row := make([]int32, per)
		copy(row, f.pages[s])
		p.BlockTable = append(p.BlockTable, row...)
	}
	out := sdpatest.NewGuarded(len(f.q))
	lse := sdpatest.NewGuarded(p.B * p.Hq * p.Sq)
	p.Out, p.LSE = out.Data(), lse.Data()
	return p, out, lse
}

// check holds p's outputs to the float64 oracle run, sequence by sequence,
// on the cache's exact contents (decoded codes × page scales), with the
// float32 tolerances of the dense problem: the paged kernels compute in
// float32 on those same values.
func (f *pagedFixture) check(p *backend.PagedProblem, out, lse *sdpatest.Guarded) error {
	if err := out.Check("Out"); err != nil {
		return err
	}
	if err := lse.Check("LSE"); err != nil {
		return err
	}
	c := f.c
	D, P := c.d, c.pageSize
	for s, n := range c.lens {
		rowOf := func(h, i int) int { return c.layout.Offset(s, h, i, p.Hq, p.Sq, D) }
		if n == 0 {
			for h := range p.Hq {
				for i := range p.Sq {
					for _, x := range p.Out[rowOf(h, i) : rowOf(h, i)+D] {
						if x != 0 {
							return fmt.Errorf("sequence %d is empty, output %v", s, x)
						}
					}
					if l := p.LSE[(s*p.Hq+h)*p.Sq+i]; !math.IsInf(float64(l), -1) {
						return fmt.Errorf("sequence %d is empty, LSE %v", s, l)
					}
				}
			}
			continue
		}
		sh := backend.Shape{B: 1, Hq: p.Hq, Hkv: c.hkv, Sq: p.Sq, Sk: n, D: D}
		dp := &backend.Problem{Shape: sh, Scale: p.Scale, Mask: c.mask, Precision: backend.FP32,
			Q: make([]float32, p.Hq*p.Sq*D), K: make([]float32, c.hkv*n*D), V: make([]float32, c.hkv*n*D),
			Out: make([]float32, p.Hq*p.Sq*D)}
		for h := range p.Hq {
			for i := range p.Sq {
				copy(dp.Q[(h*p.Sq+i)*D:], p.Q[rowOf(h, i):rowOf(h, i)+D])
			}
		}
		for h := range c.hkv {
			for pi, pg := range f.pages[s] {
				k, v, _, _ := cpu.PagedRows(f.kv, int(pg), h)
				m := min(P, n-pi*P)
				copy(dp.K[(h*n+pi*P)*D:], k[:m*D])
				copy(dp.V[(h*n+pi*P)*D:], v[:m*D])
			}
		}
		want, wantLSE := oracle.Naive(dp)
		got := make([]float32, len(dp.Out))
		gotLSE := make([]float32, p.Hq*p.Sq)
		for h := range p.Hq {
			for i := range p.Sq {
				copy(got[(h*p.Sq+i)*D:], p.Out[rowOf(h, i):rowOf(h, i)+D])
				gotLSE[h*p.Sq+i] = p.LSE[(s*p.Hq+h)*p.Sq+i]
			}
		}
		if st := sdpatest.Compare(got, want, sdpatest.FP32Tolerance(dp)); st.Beyond > 0 {
			return fmt.Errorf("sequence %d (%d tokens): output %v", s, n, st)
		}
		if st := sdpatest.Compare(gotLSE, wantLSE, sdpatest.LSETolerance(dp)); st.Beyond > 0 {
			return fmt.Errorf("sequence %d (%d tokens): LSE %v", s, n, st)
		}
	}
	return nil
}

// TestPagedAttention holds paged attention, on every kernel set, on one
// worker and on sixteen (which splits the keys of few blocks and merges the
// splits), to the oracle on the cache's contents: ragged lengths (an empty
// sequence included), pages in shuffled order, both layouts, GQA, chunks of
// new queries with the lower-right mask, page sizes 64 and 128.
func TestPagedAttention(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	for ci, c := range pagedCases {
		for _, isa := range cpu.ISAs() {
			for _, workers := range []int{1, 16} {
				t.Run(fmt.Sprintf("%s/%s/workers=%d", c.name, isa, workers), func(t *testing.T) {
					be, err := cpu.NewISA(workers, isa)
					if err != nil {
						t.Fatal(err)
					}
					f := newPagedFixture(t, be, c, rand.New(rand.NewPCG(sd, uint64(ci))))
					p, out, lse := f.problem()
					if err := f.kv.Attention(p); err != nil {
						t.Fatal(err)
					}
					if err := f.check(p, out, lse); err != nil {
						t.Error(err)
					}
				})
			}
		}
	}
}

// TestPagedCheckCatchesBrokenTable: the check above fails when attention
// reads another sequence's page, or misses the last token. (Pages in the
// wrong order would pass, rightly: without a mask, attention does not
// depend on the order of the keys.)
func TestPagedCheckCatchesBrokenTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 99))
	c := pagedCases[0]
	f := newPagedFixture(t, cpu.New(2), c, rng)
	p, out, lse := f.problem()
	p.BlockTable[1] = f.pages[3][0]
	if err := f.kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	if err := f.check(p, out, lse); err == nil {
		t.Error("another sequence's page passed the check")
	}
	p, out, lse = f.problem()
	p.SeqLens[0]--
	if err := f.kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	p.SeqLens[0]++
	if err := f.check(p, out, lse); err == nil {
		t.Error("a missing token passed the check")
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
	} {
		p := good()
		mutate(p)
		if err := kv.Attention(p); !errors.Is(err, backend.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
