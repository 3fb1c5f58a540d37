//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// pagedCPUCase is one problem of TestPagedAgainstCPU and TestPagedVariants:
// KV heads, GQA group, new queries a sequence, head dim, page size, the
// sequences' lengths, mask and layout; chunk tokens an append (0: a whole
// sequence at once); the attention variants (sinks: sdpatest.RandomSinks);
// queries scaled by qscale (0: 1); and, where forced is positive, the key
// splits forced (the cp.async kernel's on its backend, the
// warp-specialized kernel's on the others).
type pagedCPUCase struct {
	hkv, g, sq, d, page int
	lens                []int
	mask                backend.Mask
	layout              backend.Layout
	chunk               int
	window              int
	softcap             float32
	sinks               bool
	qscale              float32
	forced              int
}

func (c pagedCPUCase) name(be *kernelBackend) string {
	n := fmt.Sprintf("%s/hkv%d-g%d-sq%d-d%d-p%d-%v-%v-chunk%d-lens%v", pagedKernelName(be), c.hkv, c.g, c.sq, c.d, c.page, c.mask, c.layout, c.chunk, c.lens)
	if c.window != 0 || c.softcap != 0 || c.sinks {
		n += fmt.Sprintf("-w%d-cap%g-sinks%v-q%g", c.window, c.softcap, c.sinks, c.qscale)
	}
	if c.forced > 0 {
		n += fmt.Sprintf("-splits%d", c.forced)
	}
	return n
}

// runPagedAgainstCPU fills a cpu cache and be's GPU cache with the same
// tokens, runs c's problem on both, and holds every GPU row to the cpu
// row within twice the float32 tiers on the codes both hold (each is within
// one tier of exact attention on them); the caches must hold the same
// codes and scales.
func runPagedAgainstCPU(t *testing.T, be *kernelBackend, c pagedCPUCase, rng *rand.Rand) {
	P, D, H := c.page, c.d, c.hkv
	per, total := 1, 0
	for _, n := range c.lens {
		per = max(per, (n+P-1)/P)
		total += (n + P - 1) / P
	}
	cfg := backend.PagedConfig{KVHeads: H, HeadDim: D, PageSize: P, Pages: total + 2}
	host, _ := cpu.New(2).NewPagedKV(cfg)
	gpu, err := be.NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	if c.forced > 0 {
		if s := gpu.(*pagedKV); pagedKernelName(be) == "cp.async" {
			s.splits = c.forced
		} else {
			s.wsSplits = c.forced
		}
	}
	perm := rng.Perm(cfg.Pages)
	var table [][]int32
	for _, n := range c.lens {
		var pg []int32
		for range (n + P - 1) / P {
			pg, perm = append(pg, int32(perm[0])), perm[1:]
		}
		table = append(table, pg)
	}
	for s, n := range c.lens {
		for t0 := 0; t0 < n; {
			m := n - t0
			if c.chunk > 0 {
				m = min(m, c.chunk)
			}
			a := &backend.PagedAppend{B: 1, N: m, Layout: c.layout, K: make([]float32, m*H*D), V: make([]float32, m*H*D)}
			for i := range a.K {
				a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			}
			for tk := t0; tk < t0+m; tk++ {
				a.Page, a.Slot = append(a.Page, table[s][tk/P]), append(a.Slot, int32(tk%P))
			}
			if err := errors.Join(host.Append(a), gpu.Append(a)); err != nil {
				t.Fatal(err)
			}
			t0 += m
		}
	}
	B, hq := len(c.lens), H*c.g
	p := &backend.PagedProblem{B: B, Hq: hq, Hkv: H, Sq: c.sq, D: D, Scale: float32(1 / math.Sqrt(float64(D))), Mask: c.mask,
		Layout: c.layout, PagesPerSeq: per, Q: make([]float32, B*hq*c.sq*D)}
	qs := c.qscale
	if qs == 0 {
		qs = 1
	}
	for i := range p.Q {
		p.Q[i] = qs * float32(rng.NormFloat64())
	}
	p.SlidingWindow, p.Softcap = c.window, c.softcap
	if c.sinks {
		longest := 1
		for _, n := range c.lens {
			longest = max(longest, n)
		}
		p.Sinks = sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: longest})
	}
	for s, n := range c.lens {
		p.SeqLens = append(p.SeqLens, int32(n))
		row := make([]int32, per)
		copy(row, table[s])
		p.BlockTable = append(p.BlockTable, row...)
	}
	want, wantLSE := make([]float32, len(p.Q)), make([]float32, B*hq*c.sq)
	p.Out, p.LSE = want, wantLSE
	if err := host.Attention(p); err != nil {
		t.Fatal(err)
	}
	got, gotLSE := make([]float32, len(p.Q)), make([]float32, len(wantLSE))
	p.Out, p.LSE = got, gotLSE
	if err := gpu.Attention(p); err != nil {
		t.Fatal(err)
	}
	if err := diffPages(host.(backend.PagedReader), gpu.(backend.PagedReader), cfg); err != nil {
		t.Errorf("the caches differ: %v", err)
	}
	bad := 0
	for s, n := range c.lens {
		// Twice the float32 tiers on the codes both caches hold:
		// each result is within one of exact attention on them.
		tol, lt := sdpatest.Tolerance{}, sdpatest.Tolerance{}
		if n > 0 {
			dp, err := sdpatest.PagedSequence(host.(backend.PagedReader), p, cfg, s)
			if err != nil {
				t.Fatal(err)
			}
			tol, lt = sdpatest.FP32Tolerance(dp), sdpatest.LSETolerance(dp)
			tol.Atol, tol.Rtol, lt.Atol, lt.Rtol = 2*tol.Atol, 2*tol.Rtol, 2*lt.Atol, 2*lt.Rtol
		}
		for h := range hq {
			for i := range c.sq {
				o := c.layout.Offset(s, h, i, hq, c.sq, D)
				st := sdpatest.Compare(got[o:o+D], want[o:o+D], tol)
				l := (s*hq+h)*c.sq + i
				lst := sdpatest.Compare(gotLSE[l:l+1], wantLSE[l:l+1], lt)
				if st.Beyond+lst.Beyond > 0 || math.IsNaN(st.MaxErr) {
					if bad++; bad <= 8 {
						t.Errorf("sequence %d head %d position %d: %d of %d beyond twice %s (max error %.3g: got %g want %g); LSE got %g want %g",
							s, h, i, st.Beyond, D, tol.Why, st.MaxErr, got[o+st.FirstBad], want[o+st.FirstBad], gotLSE[l], wantLSE[l])
					}
				}
			}
		}
	}
	if bad > 8 {
		t.Errorf("... %d rows of %d wrong", bad, B*hq*c.sq)
	}
}

// TestPagedVariants: sliding windows, softcaps and sinks on the GPU cache,
// every row against the cpu cache's (runPagedAgainstCPU), on each kernel
// the GPU runs: windows over long sequences split many ways (the splits
// cover the window's span only), windows narrower than a split and wider
// than one (forced splits), lower edges inside a tile and on its
// boundary, several row blocks of a GQA group whose rows start their
// windows at different tiles, chunked prefill rows (lower-right causal,
// some sequences shorter than the chunk); softcaps on scores far past the
// cap; sinks with one split (the warps' merge adds them) and with many
// (the split merge adds them, once); all three at once.
func TestPagedVariants(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5A7))
	bes := pagedBackends(t)
	lr, bshd, bhsd := backend.CausalLowerRight, backend.BSHD, backend.BHSD
	for _, c := range []pagedCPUCase{
		// Windows.
		{hkv: 2, g: 4, sq: 1, d: 64, page: 64, lens: []int{20000, 5000, 77, 0}, mask: lr, layout: bshd, window: 128},
		{hkv: 1, g: 4, sq: 1, d: 64, page: 64, lens: []int{20000}, mask: lr, layout: bshd, window: 3000},
		{hkv: 2, g: 4, sq: 1, d: 128, page: 64, lens: []int{20000, 5000, 77}, mask: lr, layout: bhsd, window: 300, forced: 4},
		{hkv: 1, g: 4, sq: 1, d: 64, page: 64, lens: []int{1000, 999, 1001, 1031, 1024, 45}, mask: lr, layout: bshd, window: 45},
		{hkv: 1, g: 4, sq: 1, d: 64, page: 64, lens: []int{1000, 999, 1001, 1031, 1024, 45}, mask: lr, layout: bshd, window: 32, forced: 2},
		{hkv: 2, g: 8, sq: 3, d: 128, page: 128, lens: []int{4000, 37, 3000}, mask: lr, layout: bhsd, chunk: 500, window: 64},
		{hkv: 2, g: 2, sq: 37, d: 64, page: 64, lens: []int{3000, 40, 20, 0}, mask: lr, layout: bhsd, chunk: 500, window: 50},
		{hkv: 2, g: 2, sq: 37, d: 64, page: 64, lens: []int{3000, 40, 20, 0}, mask: lr, layout: bhsd, chunk: 500, window: 50, forced: 3},
		{hkv: 1, g: 2, sq: 64, d: 96, page: 64, lens: []int{2500, 64}, mask: lr, layout: bshd, window: 16, forced: 2},
		{hkv: 1, g: 2, sq: 5, d: 256, page: 64, lens: []int{7000, 90}, mask: lr, layout: bshd, window: 200},
		// Softcaps.
		{hkv: 2, g: 4, sq: 1, d: 128, page: 64, lens: []int{3000, 129}, mask: lr, layout: bshd, softcap: 5, qscale: 20},
		{hkv: 2, g: 4, sq: 1, d: 64, page: 64, lens: []int{20000}, mask: backend.NoMask, layout: bhsd, softcap: 30, qscale: 8},
		{hkv: 1, g: 2, sq: 9, d: 256, page: 64, lens: []int{700, 90}, mask: lr, layout: bshd, softcap: 15, qscale: 10},
		// Sinks.
		{hkv: 2, g: 4, sq: 1, d: 64, page: 64, lens: []int{100, 40, 0}, mask: lr, layout: bshd, sinks: true},
		{hkv: 1, g: 8, sq: 1, d: 64, page: 64, lens: []int{16000, 300}, mask: backend.NoMask, layout: bhsd, sinks: true},
		{hkv: 2, g: 4, sq: 1, d: 128, page: 64, lens: []int{5000, 700}, mask: lr, layout: bshd, sinks: true, forced: 7},
		{hkv: 1, g: 2, sq: 7, d: 80, page: 64, lens: []int{3000, 3}, mask: lr, layout: bhsd, sinks: true, forced: 5},
		// All three.
		{hkv: 2, g: 4, sq: 9, d: 128, page: 64, lens: []int{6000, 5, 700}, mask: lr, layout: bshd, chunk: 900,
			window: 200, softcap: 10, sinks: true, qscale: 4, forced: 3},
		{hkv: 2, g: 4, sq: 1, d: 64, page: 64, lens: []int{30000, 1}, mask: lr, layout: bhsd, window: 1000, softcap: 20, sinks: true, qscale: 3},
	} {
		for _, be := range bes {
			t.Run(c.name(be), func(t *testing.T) { runPagedAgainstCPU(t, be, c, rng) })
		}
	}
}

// pagedUnitTiles mirrors kernels/paged/warp.cuh's paged_unit_n: the tiles
// [ta, tb) that split split of row block rb of a sequence of n keys reads,
// under s.params.
func pagedUnitTiles(pp *pagedParams, keys, g, rb, split, n int) (ta, tb int) {
	sq, w := int(pp.Sq), int(pp.Window)
	r0 := rb * 8
	rows := min(8, g*sq-r0)
	last := (r0 + rows - 1) / g
	vis := n
	if pp.Mask == 2 {
		vis = max(0, min(n, n-sq+last+1))
	}
	ta = split * int(pp.TilesPerSplit)
	if w > 0 {
		ta += max(0, n-sq+r0/g-w+1) / keys
	}
	return ta, min((vis+keys-1)/keys, ta+int(pp.TilesPerSplit))
}

// TestPagedPlanWindow: under a sliding window the plan's splits, as the
// kernels place them (pagedUnitTiles), cover every key each row sees and
// read only the tiles of the window's span, with no split planned past it:
// a decode step at 32768 keys with a window of 128 reads at most 5 tiles a
// (sequence, KV head), as a 128-key cache reads 4, where without the window
// it reads 1024. On an
// H200's SM count, for the cp.async kernel's plan and the
// warp-specialized kernel's, with and without a graph's MaxSeqLen.
func TestPagedPlanWindow(t *testing.T) {
	dev := &device{SMs: 132, SharedPerSM: 233472}
	for _, c := range []struct {
		b, hq, hkv, sq, d, window int
		lens                      []int
		maxLen                    int
		readMax                   int // tiles an item reads at most (0: unchecked)
	}{
		{8, 64, 8, 1, 64, 128, []int{32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768}, 0, 5},
		{8, 64, 8, 1, 64, 128, []int{32768, 32768, 32768, 32768, 32768, 32768, 32768, 32768}, 32768, 5},
		{8, 64, 8, 1, 64, 0, []int{128, 128, 128, 128, 128, 128, 128, 128}, 0, 4},
		{2, 16, 2, 1, 128, 1000, []int{30001, 7}, 0, 33},
		{3, 4, 2, 37, 64, 50, []int{3000, 40, 20}, 0, 0},
		{2, 16, 2, 3, 128, 64, []int{4000, 37}, 4096, 0},
		{1, 4, 1, 64, 64, 16, []int{2500}, 0, 0},
		{4, 8, 1, 1, 64, 45, []int{1000, 999, 1001, 1031}, 0, 3},
	} {
		for _, ws := range []bool{false, true} {
			tc, err := tiles.Paged(c.d)
			if err != nil {
				t.Fatal(err)
			}
			s := &pagedKV{dev: dev, tc: tc, cfg: backend.PagedConfig{PageSize: 64}}
			s.perSM, _ = pagedOccupancy(dev, tc, 0)
			if ws {
				if s.wsCfg, err = tiles.PagedWS(c.d); err != nil {
					continue
				}
			}
			per := 0
			for _, n := range c.lens {
				per = max(per, (n+63)/64)
			}
			p := &backend.PagedProblem{B: c.b, Hq: c.hq, Hkv: c.hkv, Sq: c.sq, D: c.d, Scale: 1, Mask: backend.CausalLowerRight,
				PagesPerSeq: max(per, (c.maxLen+63)/64), MaxSeqLen: c.maxLen}
			p.SlidingWindow = c.window
			for _, n := range c.lens {
				p.SeqLens = append(p.SeqLens, int32(n))
			}
			s.plan(p)
			pp, keys, g := s.params, tc.Keys, c.hq/c.hkv
			name := fmt.Sprintf("B%d Hq%d Hkv%d Sq%d D%d window %d lens %v max %d ws %v (%d splits of %d tiles)",
				c.b, c.hq, c.hkv, c.sq, c.d, c.window, c.lens, c.maxLen, s.useWS, pp.Splits, pp.TilesPerSplit)
			if c.readMax > 0 && int(pp.Splits-1)*int(pp.TilesPerSplit) >= c.readMax {
				t.Errorf("%s: splits start past the %d tiles of the window's span", name, c.readMax)
			}
			for b, n := range c.lens {
				for rb := range int(pp.RowBlocks) {
					read := 0
					covered := make([]bool, (n+keys-1)/keys)
					for sp := range int(pp.Splits) {
						ta, tb := pagedUnitTiles(pp, keys, g, rb, sp, n)
						for k := ta; k < tb; k++ {
							covered[k] = true
						}
						read += max(0, tb-ta)
					}
					if c.readMax > 0 && read > c.readMax {
						t.Errorf("%s: sequence %d row block %d reads %d tiles, want at most %d", name, b, rb, read, c.readMax)
					}
					for r := rb * 8; r < min(rb*8+8, g*c.sq); r++ {
						lo, hi := p.KeyRange(b, r/g)
						for j := lo; j < hi; j++ {
							if !covered[j/keys] {
								t.Fatalf("%s: sequence %d row %d (keys %d..%d): key %d in no split", name, b, r, lo, hi-1, j)
							}
						}
					}
				}
			}
		}
	}
}

// TestPagedGraphVariants: a windowed, softcapped decode with sinks captured
// into a graph (lengths and block table in PagedTables, planned for
// MaxSeqLen; the sinks copied outside the capture, which holds kernels
// and memsets only) replays with the sinks of its capture while calls between the
// replays pass other sinks (each distinct array has device memory of its
// own: the device's sinkStore), and both match the float64 oracle on the values the
// cache holds within the float32 tiers, outputs poisoned before each.
func TestPagedGraphVariants(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	for _, be := range pagedBackends(t) {
		t.Run(pagedKernelName(be), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x6AF))
			const H, g, D, P, maxLen, steps = 2, 4, 64, 64, 2048, 24
			lens0 := []int{50, 700, 1}
			B, hq, per := len(lens0), H*g, maxLen/P
			cfg := backend.PagedConfig{KVHeads: H, HeadDim: D, PageSize: P, Pages: B * per}
			kv, err := be.NewPagedKV(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Close()
			s := kv.(*pagedKV)
			d := s.dev
			lens, table := make([]int32, B), make([]int32, B*per)
			for i := range table {
				table[i] = int32(i) // sequence b's pages b·per...
			}
			add := func(b, n int) {
				a := &backend.PagedAppend{B: 1, N: n, K: make([]float32, n*H*D), V: make([]float32, n*H*D)}
				for i := range a.K {
					a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				for tk := int(lens[b]); tk < int(lens[b])+n; tk++ {
					a.Page, a.Slot = append(a.Page, table[b*per+tk/P]), append(a.Slot, int32(tk%P))
				}
				if err := kv.Append(a); err != nil {
					t.Fatal(err)
				}
				lens[b] += int32(n)
			}
			for b, n := range lens0 {
				add(b, n)
			}
			tables, err := s.NewTables(B, per)
			if err != nil {
				t.Fatal(err)
			}
			defer tables.Free()
			whole := [][2]int{{0, len(table)}}
			if err := tables.Write(lens, table, whole); err != nil {
				t.Fatal(err)
			}
			nq := B * hq * D
			q, err1 := d.Alloc(4 * int64(nq))
			out, err2 := d.Alloc(4 * int64(nq))
			lse, err3 := d.Alloc(4 * int64(B*hq))
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			defer func() { q.Free(); out.Free(); lse.Free() }()
			sinksA := sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: 500})
			vr := backend.Variants{SlidingWindow: 300, Softcap: 20, Sinks: append([]float32(nil), sinksA...)}
			p := &backend.PagedProblem{B: B, Hq: hq, Hkv: H, Sq: 1, D: D, Scale: float32(1 / math.Sqrt(float64(D))),
				Mask: backend.CausalLowerRight, Layout: backend.BHSD, SeqLens: lens, BlockTable: table, PagesPerSeq: per,
				QBuf: q, OutBuf: out, LSEBuf: lse, MaxSeqLen: maxLen, Tables: tables, Variants: vr}
			s.poison = true
			// The sinks go to the device outside the capture: the graph
			// holds the kernels and the outputs' two poison memsets, no copy.
			census := *p
			census.Sinks = sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: 500})
			if k, m, o, err := d.capturedNodes(func() error { return kv.Attention(&census) }); err != nil || k == 0 || m != 0 || o != 2 {
				t.Fatalf("the captured call with sinks: %d kernels, %d copies, %d other nodes (%v); want kernels and 2 memsets", k, m, o, err)
			}
			g0, err := d.Capture(func() error { return kv.Attention(p) })
			if err != nil {
				t.Fatal(err)
			}
			defer g0.Close()
			// check holds out and lse to the oracle for queries hostQ under
			// variants v.
			check := func(what string, hostQ, got, gotLSE []float32, v backend.Variants) {
				t.Helper()
				hp := &backend.PagedProblem{B: B, Hq: hq, Hkv: H, Sq: 1, D: D, Scale: p.Scale, Mask: p.Mask, Layout: p.Layout,
					SeqLens: lens, BlockTable: table, PagesPerSeq: per, Q: hostQ, Out: make([]float32, nq), Variants: v}
				for b := range B {
					dp, err := sdpatest.PagedSequence(s, hp, cfg, b)
					if err != nil {
						t.Fatal(err)
					}
					wo, wl := oracle.Naive(dp)
					tol, lt := sdpatest.FP32Tolerance(dp), sdpatest.LSETolerance(dp)
					st := sdpatest.Compare(got[b*hq*D:(b+1)*hq*D], wo, tol)
					lst := sdpatest.Compare(gotLSE[b*hq:(b+1)*hq], wl, lt)
					if st.Beyond+lst.Beyond > 0 || math.IsNaN(st.MaxErr) || math.IsNaN(lst.MaxErr) {
						t.Fatalf("%s, sequence %d of %d tokens: %d of %d outputs beyond %s (max error %.3g), %d LSE beyond %s",
							what, b, lens[b], st.Beyond, hq*D, tol.Why, st.MaxErr, lst.Beyond, lt.Why)
					}
				}
			}
			hostQ, got, gotLSE := make([]float32, nq), make([]float32, nq), make([]float32, B*hq)
			bad := make([]float32, nq)
			for i := range bad {
				bad[i] = math.Float32frombits(poison.Bits)
			}
			for step := range steps {
				n := 1
				if step%8 == 3 {
					n = 97 // a chunk: past a page and past the window's width
				}
				for b := range B {
					if int(lens[b])+n <= maxLen {
						add(b, n)
					}
				}
				if err := tables.Write(lens, table, whole); err != nil {
					t.Fatal(err)
				}
				for i := range hostQ {
					hostQ[i] = float32(rng.NormFloat64())
				}
				if err := errors.Join(q.Write(bytesOf(hostQ)), out.Write(bytesOf(bad)), lse.Write(bytesOf(bad[:B*hq]))); err != nil {
					t.Fatal(err)
				}
				if err := g0.Replay(); err != nil {
					t.Fatal(err)
				}
				if err := errors.Join(out.Read(bytesOf(got)), lse.Read(bytesOf(gotLSE))); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("step %d: replay", step), hostQ, got, gotLSE, vr)
				// A call of its own with other sinks (and no window), on
				// host memory, between two replays.
				other := backend.Variants{Softcap: 20, Sinks: sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: 500})}
				hp := &backend.PagedProblem{B: B, Hq: hq, Hkv: H, Sq: 1, D: D, Scale: p.Scale, Mask: p.Mask, Layout: p.Layout,
					SeqLens: lens, BlockTable: table, PagesPerSeq: per, Q: hostQ, Out: got, LSE: gotLSE, Variants: other}
				if err := kv.Attention(hp); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("step %d: a call with other sinks", step), hostQ, got, gotLSE, other)
			}
		})
	}
}

// BenchmarkPagedDecodeWindow times decode steps (attention only, per call
// in CUDA-graph replay, shuffled pages) of B8 Hq64 Hkv8 D64: a 128-key
// cache, a 32768-key cache, and the 32768-key cache under a sliding window
// of 128 (which reads the window's pages only: about the 128-key cache's
// time), and the variants' cost beside the plain call at 8192 keys
// (softcap 30; sinks; all three with a window of 4096).
func BenchmarkPagedDecodeWindow(b *testing.B) {
	const B, hq, hkv, d = 8, 64, 8, 64
	sinks := make([]float32, hq)
	for h := range sinks {
		sinks[h] = float32(h%7) - 2
	}
	for _, c := range []struct {
		name string
		sk   int
		v    backend.Variants
	}{
		{"Sk128", 128, backend.Variants{}},
		{"Sk32768", 32768, backend.Variants{}},
		{"Sk32768-window128", 32768, backend.Variants{SlidingWindow: 128}},
		{"Sk8192", 8192, backend.Variants{}},
		{"Sk8192-softcap", 8192, backend.Variants{Softcap: 30}},
		{"Sk8192-sinks", 8192, backend.Variants{Sinks: sinks}},
		{"Sk8192-window4096-softcap-sinks", 8192, backend.Variants{SlidingWindow: 4096, Softcap: 30, Sinks: sinks}},
	} {
		for _, kernel := range []string{"default", "cp.async"} {
			b.Run(c.name+"/"+kernel, func(b *testing.B) {
				decodeVariants = c.v
				defer func() { decodeVariants = backend.Variants{} }()
				be := &kernelBackend{name: "cuda", pagedCpAsync: kernel == "cp.async"}
				times, err := decodeTimesOn(be, B, hq, hkv, c.sk, d, true, 0, 0, max(b.N, 50), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(median(times), "us/call")
			})
		}
	}
}

// decodeVariants are the variants decodeTimesOn's steps ask for
// (BenchmarkPagedDecodeWindow; none otherwise).
var decodeVariants backend.Variants
