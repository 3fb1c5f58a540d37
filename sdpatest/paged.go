package sdpatest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/oracle"
)

// The paged-cache part of the suite. A backend's cache is held to a model of
// what the cache must contain under the scale policy of package backend,
// kept here as values (not codes) and written independently of any backend:
// per (page, head) a power-of-two scale s, the smallest with amax <=
// s·PageHeadroom, set by the first nonzero token; when a token's amax
// exceeds 448·s, the scale grows the same way and every stored value is
// rounded again to E4M3 at the new scale. Attention is then checked against
// the float64 oracle on the model's values with the float32 tolerances,
// since a backend computes in float32 on exactly those values.

// pagedModel is the expected contents of a cache: k and v values per
// (page, head), [PageSize][D] rows, and their scales.
type pagedModel struct {
	cfg    backend.PagedConfig
	k, v   [][]float32
	ks, vs []float64
}

func newPagedModel(cfg backend.PagedConfig) *pagedModel {
	m := &pagedModel{cfg: cfg, ks: make([]float64, cfg.Pages*cfg.KVHeads), vs: make([]float64, cfg.Pages*cfg.KVHeads)}
	for range cfg.Pages * cfg.KVHeads {
		m.k = append(m.k, make([]float32, cfg.PageSize*cfg.HeadDim))
		m.v = append(m.v, make([]float32, cfg.PageSize*cfg.HeadDim))
	}
	return m
}

// pow2Scale is the smallest power of two s with amax <= s·PageHeadroom, at
// least 2^-149.
func pow2Scale(amax float64) float64 {
	s := 1.0
	for s*backend.PageHeadroom < amax {
		s *= 2
	}
	for s > math.Ldexp(1, -149) && s/2*backend.PageHeadroom >= amax {
		s /= 2
	}
	return s
}

func roundE4M3(x float32, s float64) float32 {
	return fp8.ToE4M3(x/float32(s), fp8.SatFinite).Float32() * float32(s)
}

func (m *pagedModel) put(vals []float32, scale *float64, row []float32, slot int) {
	D := m.cfg.HeadDim
	var amax float64
	for _, x := range row {
		amax = max(amax, math.Abs(float64(x)))
	}
	if amax > 0 && *scale == 0 {
		*scale = pow2Scale(amax)
	} else if amax > fp8.MaxE4M3**scale {
		*scale = pow2Scale(amax)
		for i, x := range vals {
			vals[i] = roundE4M3(x, *scale)
		}
	}
	for i, x := range row {
		if *scale == 0 {
			vals[slot*D+i] = 0
		} else {
			vals[slot*D+i] = roundE4M3(x, *scale)
		}
	}
}

func (m *pagedModel) append(a *backend.PagedAppend) {
	H, D := m.cfg.KVHeads, m.cfg.HeadDim
	for b := range a.B {
		for t := range a.N {
			pg, slot := int(a.Page[b*a.N+t]), int(a.Slot[b*a.N+t])
			for h := range H {
				i := pg*H + h
				if slot == 0 {
					clear(m.k[i])
					clear(m.v[i])
					m.ks[i], m.vs[i] = 0, 0
				}
				src := a.Layout.Offset(b, h, t, H, a.N, D)
				m.put(m.k[i], &m.ks[i], a.K[src:src+D], slot)
				m.put(m.v[i], &m.vs[i], a.V[src:src+D], slot)
			}
		}
	}
}

// PagedCase is one row of the paged-cache table: sequences of the given
// lengths (0: empty) filled in random chunks into shuffled pages, then new
// queries (Sq per sequence) against them. Magnitudes, if not empty, scales
// the tokens of every sequence in turn by these factors, so that pages must
// grow their scales; PageMagnitudes, if not empty, scales the values of a
// sequence's page i by factor i (cyclically), so that neighbouring pages
// hold V scales orders of magnitude apart while the weights stay spread.
type PagedCase struct {
	Name               string
	KVHeads, Group, D  int
	PageSize, Sq       int
	Lens               []int
	Mask               backend.Mask
	Layout             backend.Layout
	Magnitudes         []float64
	FirstAppendBatched bool
	PageMagnitudes     []float64
	// Window and Softcap are the problem's sliding window and softcap;
	// Sinks asks for random sink logits (RandomSinks).
	Window  int
	Softcap float32
	Sinks   bool
	// Queries, if not nil, makes the batch varlen: sequence s gets
	// Queries[s] new queries (Sq is ignored), packed into one tensor.
	Queries []int
}

// PagedCases returns the paged-cache table.
func PagedCases() []PagedCase {
	return []PagedCase{
		{"decode-gqa", 2, 4, 64, 64, 1, []int{300, 1, 64, 129}, backend.NoMask, backend.BHSD, nil, true, nil, 0, 0, false, nil},
		{"decode-mha-d128", 3, 1, 128, 64, 1, []int{257}, backend.CausalLowerRight, backend.BSHD, nil, false, nil, 0, 0, false, nil},
		{"decode-split", 2, 4, 64, 64, 1, []int{2000, 300, 0}, backend.CausalLowerRight, backend.BSHD, nil, true, nil, 0, 0, false, nil},
		{"chunk-lr", 2, 2, 64, 64, 7, []int{200, 7, 65}, backend.CausalLowerRight, backend.BHSD, nil, true, nil, 0, 0, false, nil},
		{"chunk-longer-than-seq", 1, 4, 32, 64, 9, []int{5, 0, 70}, backend.CausalLowerRight, backend.BSHD, nil, false, nil, 0, 0, false, nil},
		{"prefill-rows", 1, 2, 80, 128, 100, []int{100, 300}, backend.CausalLowerRight, backend.BHSD, nil, false, nil, 0, 0, false, nil},
		{"page128-nomask", 2, 2, 64, 128, 3, []int{511, 1000}, backend.NoMask, backend.BSHD, nil, true, nil, 0, 0, false, nil},
		{"growing-scales", 2, 2, 64, 64, 2, []int{150, 90}, backend.CausalLowerRight, backend.BHSD, []float64{1e-3, 1, 30, 0.1, 2e3, 1e5, 7}, false, nil, 0, 0, false, nil},
		// V pages 2^-13 to 2^10 apart in a sequence long enough to split.
		{"page-scales", 2, 2, 128, 64, 1, []int{1100, 300}, backend.CausalLowerRight, backend.BSHD, nil, false,
			[]float64{1, 1e3, 1e-3, 4, 1e-4, 3e2, 0.5, 0.06, 9}, 0, 0, false, nil},
		// Windows far shorter than the sequences, some of whose queries'
		// windows start past whole pages; sinks; a softcap with growing
		// page scales; all three on a chunk.
		{"window-decode", 2, 4, 64, 64, 1, []int{2000, 300, 0, 100}, backend.CausalLowerRight, backend.BSHD, nil, true, nil, 128, 0, false, nil},
		{"window-chunk", 2, 2, 64, 64, 7, []int{200, 7, 65}, backend.CausalLowerRight, backend.BHSD, nil, false, nil, 33, 0, false, nil},
		{"sinks-decode", 2, 4, 64, 64, 1, []int{300, 1, 64, 129}, backend.NoMask, backend.BHSD, nil, true, nil, 0, 0, true, nil},
		{"softcap-growing-scales", 2, 2, 64, 64, 2, []int{150, 90}, backend.CausalLowerRight, backend.BHSD, []float64{1e-3, 1, 30, 0.1, 2e3, 1e5, 7}, false, nil, 0, 20, false, nil},
		{"all-chunk", 1, 4, 128, 64, 9, []int{5, 0, 700}, backend.CausalLowerRight, backend.BSHD, nil, false, nil, 100, 10, true, nil},
		// A small cap under windows whose edges fall inside a tile: a
		// masked key must stay out, not come back at the cap's floor -c.
		// A decode step of a group of four, and five rows of a group of
		// two (the decode kernels lay such rows out otherwise).
		{"softcap-window-decode", 2, 4, 64, 64, 1, []int{700, 45, 300}, backend.CausalLowerRight, backend.BSHD, nil, false, nil, 40, 2, false, nil},
		{"softcap-window-chunk", 1, 2, 64, 64, 5, []int{700, 45}, backend.CausalLowerRight, backend.BHSD, nil, false, nil, 40, 2, false, nil},
		// Long enough to split the keys (a merge of partial rows, the
		// sink added once), with and without a window.
		{"sinks-split", 2, 4, 64, 64, 1, []int{2000, 300, 0}, backend.CausalLowerRight, backend.BSHD, nil, true, nil, 0, 0, true, nil},
		{"all-split", 1, 4, 64, 64, 1, []int{3000, 500}, backend.CausalLowerRight, backend.BHSD, nil, false, nil, 1000, 5, true, nil},
		// Varlen batches: chunks of prompts beside single decode tokens
		// and a sequence with no queries; long enough to split the keys,
		// with a window, sinks and a softcap on a chunk.
		{Name: "varlen-mixed", KVHeads: 2, Group: 4, D: 64, PageSize: 64, Lens: []int{300, 2000, 65, 0, 7, 129}, Mask: backend.CausalLowerRight,
			Layout: backend.BSHD, FirstAppendBatched: true, Queries: []int{17, 1, 9, 0, 7, 1}},
		{Name: "varlen-nomask", KVHeads: 1, Group: 2, D: 128, PageSize: 64, Lens: []int{1100, 5, 64}, Mask: backend.NoMask,
			Layout: backend.BHSD, Queries: []int{1, 3, 40}},
		{Name: "varlen-split", KVHeads: 1, Group: 2, D: 64, PageSize: 64, Lens: []int{200, 3000}, Mask: backend.CausalLowerRight,
			Layout: backend.BSHD, Queries: []int{3, 1}},
		// A sequence without tokens with queries (zeros, LSE -Inf), and a
		// group of 3 query heads, which does not divide a row block of 8.
		{Name: "varlen-empty-g3", KVHeads: 2, Group: 3, D: 64, PageSize: 64, Lens: []int{0, 700, 5}, Mask: backend.CausalLowerRight,
			Layout: backend.BHSD, Window: 40, Sinks: true, Queries: []int{2, 11, 5}},
		{Name: "varlen-all", KVHeads: 2, Group: 2, D: 64, PageSize: 64, Lens: []int{2500, 90, 300}, Mask: backend.CausalLowerRight,
			Layout: backend.BHSD, Window: 100, Softcap: 8, Sinks: true, Queries: []int{33, 1, 0}},
	}
}

// pagedRun is one case's cache, its model, and the problem over it.
type pagedRun struct {
	c     PagedCase
	kv    backend.PagedKV
	model *pagedModel
	pages [][]int32
	p     *backend.PagedProblem
	out   *Guarded
	lse   *Guarded
}

// errPagedSkip: the backend does not hold this case's page size, or has
// no kernel for its variants.
var errPagedSkip = errors.New("page size unsupported")

func newPagedRun(nb backend.PagedBackend, c PagedCase, rng *rand.Rand) (*pagedRun, error) {
	P := c.PageSize
	total := 0
	for _, n := range c.Lens {
		total += (n + P - 1) / P
	}
	cfg := backend.PagedConfig{KVHeads: c.KVHeads, HeadDim: c.D, PageSize: P, Pages: total + 3}
	kv, err := nb.NewPagedKV(cfg)
	if errors.Is(err, backend.ErrUnsupported) {
		return nil, errPagedSkip
	}
	if err != nil {
		return nil, err
	}
	r := &pagedRun{c: c, kv: kv, model: newPagedModel(cfg)}
	perm := rng.Perm(cfg.Pages)
	for _, n := range c.Lens {
		var pg []int32
		for range (n + P - 1) / P {
			pg = append(pg, int32(perm[0]))
			perm = perm[1:]
		}
		r.pages = append(r.pages, pg)
	}
	tok := 0
	randRows := func(n int) []float32 { return randRows(rng, n) }
	appendTokens := func(seqs []int, from, n int) error {
		a := &backend.PagedAppend{B: len(seqs), N: n, Layout: c.Layout,
			K: randRows(len(seqs) * n * c.KVHeads * c.D), V: randRows(len(seqs) * n * c.KVHeads * c.D)}
		if len(c.Magnitudes) > 0 { // each row of D elements gets the next factor
			for i := range a.K {
				f := float32(c.Magnitudes[(tok+i/c.D)%len(c.Magnitudes)])
				a.K[i] *= f
				a.V[i] *= f
			}
			tok += len(a.K) / c.D
		}
		if len(c.PageMagnitudes) > 0 { // row i's token position, by the layout
			for i := range a.V {
				row := i / c.D
				j := row % n // [B][H][N][D]
				if c.Layout == backend.BSHD {
					j = row / c.KVHeads % n // [B][N][H][D]
				}
				a.V[i] *= float32(c.PageMagnitudes[(from+j)/P%len(c.PageMagnitudes)])
			}
		}
		for _, s := range seqs {
			for t := from; t < from+n; t++ {
				a.Page = append(a.Page, r.pages[s][t/P])
				a.Slot = append(a.Slot, int32(t%P))
			}
		}
		if err := kv.Append(a); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		r.model.append(a)
		return nil
	}
	done := make([]int, len(c.Lens))
	if c.FirstAppendBatched && len(c.Lens) >= 2 {
		if n := min(c.Lens[0], c.Lens[1], 5); n > 0 {
			if err := appendTokens([]int{0, 1}, 0, n); err != nil {
				return nil, err
			}
			done[0], done[1] = n, n
		}
	}
	for s, n := range c.Lens {
		for done[s] < n {
			step := min(n-done[s], 1+rng.IntN(90))
			if err := appendTokens([]int{s}, done[s], step); err != nil {
				return nil, err
			}
			done[s] += step
		}
	}
	r.finish(rng)
	return r, nil
}

// finish builds the problem over the run's sequences (c.Lens tokens in
// r.pages each) with random queries and guarded outputs.
func (r *pagedRun) finish(rng *rand.Rand) {
	c := r.c
	per := 1
	for _, pg := range r.pages {
		per = max(per, len(pg))
	}
	B, hq := len(c.Lens), c.KVHeads*c.Group
	p := &backend.PagedProblem{B: B, Hq: hq, Hkv: c.KVHeads, Sq: c.Sq, D: c.D,
		Scale: float32(1 / math.Sqrt(float64(c.D))), Mask: c.Mask, Layout: c.Layout, PagesPerSeq: per}
	if c.Queries != nil {
		p.QStarts, p.Sq = make([]int32, B+1), slices.Max(c.Queries)
		for s, n := range c.Queries {
			p.QStarts[s+1] = p.QStarts[s] + int32(n)
		}
	}
	p.Q = randRows(rng, p.Rows()*hq*c.D)
	p.SlidingWindow, p.Softcap = c.Window, c.Softcap
	if c.Sinks {
		p.Sinks = RandomSinks(rng, backend.Shape{Hq: hq, Sk: max(slices.Max(c.Lens), 1)})
	}
	for s, n := range c.Lens {
		p.SeqLens = append(p.SeqLens, int32(n))
		row := make([]int32, per)
		copy(row, r.pages[s])
		p.BlockTable = append(p.BlockTable, row...)
	}
	r.out, r.lse = NewGuarded(len(p.Q)), NewGuarded(p.Rows()*hq)
	p.Out, p.LSE = r.out.Data(), r.lse.Data()
	r.p = p
}

// randRows draws n values from N(0, 1).
func randRows(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// check holds the finished problem to the oracle, sequence by sequence, on
// the model's values.
func (r *pagedRun) check() error {
	if err := r.out.Check("Out"); err != nil {
		return err
	}
	if err := r.lse.Check("LSE"); err != nil {
		return err
	}
	c, p := r.c, r.p
	D, P := c.D, c.PageSize
	for s, n := range c.Lens {
		rowOf := func(h, i int) int { return p.QOffset(s, h, i) }
		sq := p.Queries(s)
		if sq == 0 { // a varlen sequence without queries: its rows are others'
			continue
		}
		if n == 0 {
			for h := range p.Hq {
				for i := range sq {
					for _, x := range p.Out[rowOf(h, i) : rowOf(h, i)+D] {
						if x != 0 {
							return fmt.Errorf("sequence %d is empty, output %v", s, x)
						}
					}
					if l := p.LSE[p.LSEIndex(s, h, i)]; !math.IsInf(float64(l), -1) {
						return fmt.Errorf("sequence %d is empty, LSE %v", s, l)
					}
				}
			}
			continue
		}
		dp := &backend.Problem{Shape: backend.Shape{B: 1, Hq: p.Hq, Hkv: c.KVHeads, Sq: sq, Sk: n, D: D},
			Scale: p.Scale, Mask: c.Mask, Precision: backend.FP32, Variants: p.Variants,
			Q: make([]float32, p.Hq*sq*D), K: make([]float32, c.KVHeads*n*D), V: make([]float32, c.KVHeads*n*D),
			Out: make([]float32, p.Hq*sq*D)}
		got := make([]float32, len(dp.Out))
		gotLSE := make([]float32, p.Hq*sq)
		for h := range p.Hq {
			for i := range sq {
				copy(dp.Q[(h*sq+i)*D:], p.Q[rowOf(h, i):rowOf(h, i)+D])
				copy(got[(h*sq+i)*D:], p.Out[rowOf(h, i):rowOf(h, i)+D])
				gotLSE[h*sq+i] = p.LSE[p.LSEIndex(s, h, i)]
			}
		}
		for h := range c.KVHeads {
			for pi, pg := range r.pages[s] {
				m := min(P, n-pi*P)
				i := int(pg)*c.KVHeads + h
				copy(dp.K[(h*n+pi*P)*D:], r.model.k[i][:m*D])
				copy(dp.V[(h*n+pi*P)*D:], r.model.v[i][:m*D])
			}
		}
		want, wantLSE := oracle.Naive(dp)
		if st := Compare(got, want, FP32Tolerance(dp)); st.Beyond > 0 {
			return fmt.Errorf("sequence %d (%d tokens): Out: %d of %d beyond tolerance, max error %.3g, first at %d: got %g want %g",
				s, n, st.Beyond, st.N, st.MaxErr, st.FirstBad, got[st.FirstBad], want[st.FirstBad])
		}
		if st := Compare(gotLSE, wantLSE, LSETolerance(dp)); st.Beyond > 0 {
			return fmt.Errorf("sequence %d (%d tokens): LSE: %d of %d beyond tolerance, first at %d: got %g want %g",
				s, n, st.Beyond, st.N, st.FirstBad, gotLSE[st.FirstBad], wantLSE[st.FirstBad])
		}
	}
	return nil
}

// PagedFailures runs the paged table on nb with inputs from rng and returns
// the failures (ErrNothingRan if the backend took no case's page size).
func PagedFailures(nb backend.PagedBackend, rng *rand.Rand) []error {
	var errs []error
	ran := 0
	for _, c := range PagedCases() {
		if err := runPaged(nb, c, rng); errors.Is(err, errPagedSkip) {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
		ran++
	}
	if err := runPagedFork(nb, rng); err != nil && !errors.Is(err, errPagedSkip) {
		errs = append(errs, fmt.Errorf("fork-truncate-copy: %w", err))
	}
	if ran == 0 {
		errs = append(errs, ErrNothingRan)
	}
	return errs
}

func runPaged(nb backend.PagedBackend, c PagedCase, rng *rand.Rand) error {
	r, err := newPagedRun(nb, c, rng)
	if err != nil {
		return err
	}
	defer r.kv.Close()
	if err := r.p.Validate(r.kv.Config()); err != nil {
		return err
	}
	if err := r.kv.Attention(r.p); errors.Is(err, backend.ErrUnsupported) && r.p.Variants.Any() {
		return errPagedSkip
	} else if err != nil {
		return err
	}
	return r.check()
}

// RunPaged runs the paged table on nb, each case as a subtest, and the
// fork-truncate-copy scenario (CopyPage, copy-on-write).
func RunPaged[T TB[T]](t T, nb backend.PagedBackend) {
	seed := Seed()
	t.Logf("paged cache: seed %d (set FP8ATTN_SEED to reproduce)", seed)
	rng := rand.New(rand.NewPCG(seed, 0xCAC4E))
	ran := 0
	for _, c := range PagedCases() {
		t.Run(c.Name, func(t T) {
			err := runPaged(nb, c, rng)
			if errors.Is(err, errPagedSkip) {
				t.Skipf("page size %d, or the case's variants, unsupported", c.PageSize)
			}
			ran++
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("fork-truncate-copy", func(t T) {
		if err := runPagedFork(nb, rng); errors.Is(err, errPagedSkip) {
			t.Skipf("page size 64 unsupported")
		} else if err != nil {
			t.Fatal(err)
		}
	})
	if ran == 0 {
		t.Fatalf("paged cache: %v", ErrNothingRan)
	}
}

// PagedSequence returns sequence b of p as a dense float32 problem of one
// batch entry on the values a cache holds, every page the sequence uses read
// back through r and dequantized (codes times their page's scale): its
// queries in BHSD order, its SeqLens[b] keys and values, p's scale, mask
// and variants, and an Out of the right size. The oracle on it is exact attention on what
// the backend computed with, and FP32Tolerance and LSETolerance on it are
// the float32 tiers. The sequence must hold at least one token and, in a
// varlen batch, have queries.
func PagedSequence(r backend.PagedReader, p *backend.PagedProblem, c backend.PagedConfig, b int) (*backend.Problem, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: a nil PagedReader", backend.ErrInvalid)
	}
	if err := p.Validate(c); err != nil {
		return nil, err
	}
	if b < 0 || b >= p.B || p.SeqLens[b] <= 0 {
		return nil, fmt.Errorf("%w: sequence %d of %d is out of range or empty", backend.ErrInvalid, b, p.B)
	}
	n, P, D, sq := int(p.SeqLens[b]), c.PageSize, p.D, p.Queries(b)
	if sq == 0 {
		return nil, fmt.Errorf("%w: sequence %d has no queries", backend.ErrInvalid, b)
	}
	dp := &backend.Problem{Shape: backend.Shape{B: 1, Hq: p.Hq, Hkv: p.Hkv, Sq: sq, Sk: n, D: D},
		Scale: p.Scale, Mask: p.Mask, Precision: backend.FP32, Variants: p.Variants,
		Q: make([]float32, p.Hq*sq*D), K: make([]float32, p.Hkv*n*D), V: make([]float32, p.Hkv*n*D),
		Out: make([]float32, p.Hq*sq*D)}
	for h := range p.Hq {
		for i := range sq {
			o := p.QOffset(b, h, i)
			copy(dp.Q[(h*sq+i)*D:], p.Q[o:o+D])
		}
	}
	k8, v8 := make([]fp8.E4M3, P*D), make([]fp8.E4M3, P*D)
	for h := range p.Hkv {
		for pi := range (n + P - 1) / P {
			ks, vs, err := r.ReadPage(int(p.BlockTable[b*p.PagesPerSeq+pi]), h, k8, v8)
			if err != nil {
				return nil, err
			}
			for j := range min(P, n-pi*P) {
				row := (h*n + pi*P + j) * D
				for d := range D {
					dp.K[row+d] = k8[j*D+d].Float32() * ks
					dp.V[row+d] = v8[j*D+d].Float32() * vs
				}
			}
		}
	}
	return dp, nil
}
