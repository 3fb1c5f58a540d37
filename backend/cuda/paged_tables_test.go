//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPagedGraphTables: a paged attention captured with its lengths and
// block table in device memory (PagedTables) records kernels only (the
// census of its captured graph; the census is proven by the same capture
// with the outputs poisoned on the device, where it counts the two
// memsets); its replays copy nothing from the host; the tables' writes
// copy only what changed (the lengths after an append, and the table's
// entries where a page was added; nothing when nothing changed). Replayed
// after every append, across page boundaries and a chunk of several
// tokens, the graph gives the float64 oracle's result on the values the
// cache holds, within the float32 tiers (FP32Tolerance, LSETolerance),
// outputs poisoned before every replay.
func TestPagedGraphTables(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	for ci, c := range []struct {
		hkv, g, d, page, maxLen, steps int
		lens                           []int
	}{
		{2, 4, 128, 64, 512, 70, []int{50, 130, 1}},
		{1, 8, 64, 32, 256, 40, []int{31, 1, 64, 100, 7}},
	} {
		for _, be := range pagedBackends(t) {
			name := fmt.Sprintf("%s/hkv%d-g%d-d%d-p%d-max%d-lens%v", pagedKernelName(be), c.hkv, c.g, c.d, c.page, c.maxLen, c.lens)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				H, D, P := c.hkv, c.d, c.page
				B, hq, per := len(c.lens), c.hkv*c.g, c.maxLen/c.page
				cfg := backend.PagedConfig{KVHeads: H, HeadDim: D, PageSize: P, Pages: B*per + 1}
				kv, err := be.NewPagedKV(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Close()
				s := kv.(*pagedKV)
				d := s.dev
				// Pages 1 onwards are handed out in shuffled order as
				// sequences reach them: a row's entries past its pages are 0,
				// and every page taken changes its entry.
				free := rng.Perm(cfg.Pages - 1)
				for i := range free {
					free[i]++
				}
				lens, table := make([]int32, B), make([]int32, B*per)
				// add appends n tokens to sequence b and returns the table
				// entries it filled, [lo, hi) (lo == hi: none).
				add := func(b, n int) (lo, hi int) {
					lo, hi = len(table), 0
					a := &backend.PagedAppend{B: 1, N: n, K: make([]float32, n*H*D), V: make([]float32, n*H*D)}
					for i := range a.K {
						a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
					}
					for tk := int(lens[b]); tk < int(lens[b])+n; tk++ {
						e := b*per + tk/P
						if tk%P == 0 {
							table[e], free = int32(free[0]), free[1:]
							lo, hi = min(lo, e), max(hi, e+1)
						}
						a.Page, a.Slot = append(a.Page, table[e]), append(a.Slot, int32(tk%P))
					}
					if err := kv.Append(a); err != nil {
						t.Fatal(err)
					}
					lens[b] += int32(n)
					return lo, hi
				}
				for b, n := range c.lens {
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
				p := &backend.PagedProblem{B: B, Hq: hq, Hkv: H, Sq: 1, D: D, Scale: float32(1 / math.Sqrt(float64(D))),
					Mask: backend.CausalLowerRight, Layout: backend.BHSD, SeqLens: lens, BlockTable: table, PagesPerSeq: per,
					QBuf: q, OutBuf: out, LSEBuf: lse, MaxSeqLen: c.maxLen, Tables: tables}
				attend := func() error { return kv.Attention(p) }
				for _, pois := range []bool{true, false} {
					s.poison = pois
					k, m, o, err := d.capturedNodes(attend)
					t.Logf("outputs poisoned on the device %v: the graph holds %d kernel(s), %d copies, %d other nodes", pois, k, m, o)
					if err != nil {
						t.Fatal(err)
					}
					if k == 0 || m != 0 || pois && o != 2 || !pois && o != 0 {
						t.Fatalf("poisoned %v: %d kernels, %d copies, %d other nodes; want kernels only (and the 2 memsets when poisoned)", pois, k, m, o)
					}
				}
				// Without Tables a capture is refused (it would copy the host's
				// lengths at every replay).
				p.Tables = nil
				if _, err := d.Capture(attend); !errors.Is(err, backend.ErrUnsupported) {
					t.Fatalf("a capture without tables: %v, want ErrUnsupported", err)
				}
				p.Tables = tables
				g, err := d.Capture(attend)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				hostQ, got, gotLSE := make([]float32, nq), make([]float32, nq), make([]float32, B*hq)
				bad := make([]float32, nq)
				for i := range bad {
					bad[i] = math.Float32frombits(poison.Bits)
				}
				for step := range c.steps {
					n := 1
					if step == c.steps/2 {
						n = 5 // a chunk
					}
					var spans [][2]int
					for b := range B {
						if int(lens[b])+n <= c.maxLen {
							if l, h := add(b, n); l < h {
								spans = append(spans, [2]int{l, h})
							}
						}
					}
					before := tableCopies.Load()
					if err := tables.Write(lens, table, spans); err != nil {
						t.Fatal(err)
					}
					want := int64(1) // the rows are close: their spans go in one copy
					if len(spans) > 0 {
						want = 2
					}
					if n := tableCopies.Load() - before; n != want {
						t.Fatalf("step %d: the write issued %d copies, want %d (lengths, and table entries %v)", step, n, want, spans)
					}
					if err := tables.Write(lens, table, whole); err != nil || tableCopies.Load() != before+want {
						t.Fatalf("step %d: a write of what the tables hold issued %d copies (%v), want none", step, tableCopies.Load()-before-want, err)
					}
					for i := range hostQ {
						hostQ[i] = float32(rng.NormFloat64())
					}
					if err := errors.Join(q.Write(bytesOf(hostQ)), out.Write(bytesOf(bad)), lse.Write(bytesOf(bad[:B*hq]))); err != nil {
						t.Fatal(err)
					}
					before = tableCopies.Load()
					if err := g.Replay(); err != nil {
						t.Fatal(err)
					}
					if err := errors.Join(out.Read(bytesOf(got)), lse.Read(bytesOf(gotLSE))); err != nil {
						t.Fatal(err)
					}
					if n := tableCopies.Load() - before; n != 0 {
						t.Fatalf("step %d: a replay issued %d table copies", step, n)
					}
					hp := &backend.PagedProblem{B: B, Hq: hq, Hkv: H, Sq: 1, D: D, Scale: p.Scale, Mask: p.Mask, Layout: p.Layout,
						SeqLens: lens, BlockTable: table, PagesPerSeq: per, Q: hostQ, Out: make([]float32, nq)}
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
							t.Fatalf("step %d, sequence %d of %d tokens: %d of %d outputs beyond %s (max error %.3g), %d LSE beyond %s",
								step, b, lens[b], st.Beyond, hq*D, tol.Why, st.MaxErr, lst.Beyond, lt.Why)
						}
					}
				}
				// The benchmarks' timer of replays: a positive device time a
				// replay, in batches.
				times, err := be.EventTimes(20, g.Replay)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range times {
					if !(x > 0 && x < 1e5) {
						t.Fatalf("EventTimes of a replay: %v µs", times)
					}
				}
			})
		}
	}
}

// TestPagedTablesWrite: a Write copies the lengths that changed and the
// changed entries of its spans, in one copy for runs close together, one
// each for runs far apart, and one for more runs than tableMaxCopies; none
// when nothing in its spans changed; entries outside the spans keep what
// the device holds even where the caller's table differs there. The
// device memory is read back after every write.
func TestPagedTablesWrite(t *testing.T) {
	const B, per = 64, 256
	kv, err := testBackend(0).NewPagedKV(backend.PagedConfig{KVHeads: 1, HeadDim: 64, PageSize: 64, Pages: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	s := kv.(*pagedKV)
	tb, err := s.NewTables(B, per)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Free()
	tab := tb.(*pagedTables)
	lens, table := make([]int32, B), make([]int32, B*per)
	want := make([]int32, B+B*per) // what the device must hold
	for i := range table {
		table[i] = int32(i % 1000)
	}
	row := func(b, j int) int { return b*per + j }
	for i, c := range []struct {
		name   string
		change []int // table entries set to -(step+1)
		lens   bool
		spans  [][2]int
		copies int64
	}{
		{"the first write: everything", nil, true, nil, 2},
		{"nothing changed", nil, false, [][2]int{{0, B * per}}, 0},
		{"lengths only", nil, true, nil, 1},
		{"two rows close together", []int{row(3, 1), row(4, 7)}, false, [][2]int{{row(3, 0), row(3, 2)}, {row(4, 7), row(4, 8)}}, 1},
		{"two rows far apart, and lengths", []int{row(0, 0), row(63, 255)}, true, [][2]int{{0, 1}, {row(63, 255), row(63, 256)}}, 3},
		{"six rows far apart: one span", []int{row(0, 5), row(10, 5), row(20, 5), row(30, 5), row(40, 5), row(50, 5)}, false,
			[][2]int{{row(0, 5), row(0, 6)}, {row(10, 5), row(10, 6)}, {row(20, 5), row(20, 6)}, {row(30, 5), row(30, 6)}, {row(40, 5), row(40, 6)}, {row(50, 5), row(50, 6)}}, 1},
		// Row 9 lies between two runs that go as one copy: the device keeps
		// its entry, not the caller's.
		{"changes outside the spans are not written", []int{row(7, 7), row(9, 9), row(10, 0)}, false, [][2]int{{row(7, 0), row(7, 8)}, {row(10, 0), row(10, 1)}}, 1},
	} {
		if c.lens {
			for b := range lens {
				lens[b] += int32(b + 1)
			}
		}
		for _, e := range c.change {
			table[e] = int32(-(i + 1))
		}
		spans := c.spans
		if i == 0 {
			spans = nil // (the first write copies everything whatever its spans)
		}
		before := tableCopies.Load()
		if err := tb.Write(lens, table, spans); err != nil {
			t.Fatal(err)
		}
		if n := tableCopies.Load() - before; n != c.copies {
			t.Errorf("%s: %d copies, want %d", c.name, n, c.copies)
		}
		copy(want, lens)
		if i == 0 {
			copy(want[B:], table)
		}
		for _, sp := range spans {
			copy(want[B+sp[0]:B+sp[1]], table[sp[0]:sp[1]])
		}
		got := make([]int32, len(want))
		if err := s.dev.do(func() error {
			return errors.Join(cu.MemcpyDtoHAsync(unsafe.Pointer(&got[0]), tab.buf.p, int64(4*len(got)), s.dev.stream), s.dev.stream.Synchronize())
		}); err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("%s: word %d of the device tables is %d, want %d", c.name, j, got[j], want[j])
			}
		}
	}
	if err := tb.Write(lens, table, [][2]int{{5, 9}, {7, 10}}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("overlapping spans: %v, want ErrInvalid", err)
	}
	if err := errors.Join(tb.Free(), tb.Free()); err != nil {
		t.Fatal(err)
	}
	if err := tb.Write(lens, table, nil); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("a write after Free: %v, want ErrInvalid", err)
	}
}
