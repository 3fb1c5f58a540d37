//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
)

// varlenCase is a varlen batch with FP8 queries: sequence b holds lens[b]
// tokens and has queries[b] new queries; rows is the cache's prefill
// threshold (pagedKV.prefillRows), and groups the groups varlenGroups must
// form of it on Hopper.
type varlenCase struct {
	hkv, g, d, page int
	lens, queries   []int
	mask            backend.Mask
	layout          backend.Layout
	window          int
	softcap         float32
	sinks           bool
	rows            int
	groups          [][]int
	inPlace         []bool // each group's: a view of the packed tensors
	noLSE           bool
}

func (c varlenCase) name() string {
	return fmt.Sprintf("hkv%d-g%d-d%d-p%d-q%v-%v-%v-w%d-c%g-s%v", c.hkv, c.g, c.d, c.page, c.queries, c.mask, c.layout, c.window, c.softcap, c.sinks)
}

// TestPagedVarlenFP8: a varlen batch with FP8 queries runs its groups of
// sequences with many queries on the prefill kernels and the others on the
// split-KV kernel, whose plan leaves the groups' rows out. Each group's
// sequence gives bit for bit what it gives alone as a paged prefill call
// (its rows padded at the front in the group's tensor change nothing:
// the padding is zeros, and the rows' positions are their own), where
// alone it runs the same form of the kernel (at D 64 the cases' sequences
// are longer than the one-tile form's keys); each other
// sequence is within 2^-16 (relative L2) of its FP32 call alone (the
// batch may split its keys otherwise). The outputs are poisoned on the
// device first, the group buffers' padding rows hold large values from
// an earlier write, and the device-buffer form gives the host form's
// bits. (The cache's groups keep these calls off the packed form, which
// FP8ATTN_PACKED=1 turns on; TestPackedVarlen holds that.)
func TestPagedVarlenFP8(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A41)
	be.pagedGroups = true
	for _, c := range []varlenCase{
		// Two groups (the 40-query sequence of 50 tokens is too short to
		// join the first) and a decode token on the split-KV kernel.
		{hkv: 2, g: 4, d: 128, page: 64, lens: []int{700, 90, 333, 64, 1000, 50}, queries: []int{64, 1, 40, 0, 64, 40},
			mask: backend.CausalLowerRight, layout: backend.BHSD, rows: 100, groups: [][]int{{0, 2, 4}, {5}}, inPlace: []bool{false, true}},
		{hkv: 1, g: 2, d: 64, page: 64, lens: []int{300, 520, 260, 40}, queries: []int{130, 130, 1, 2},
			mask: backend.NoMask, layout: backend.BSHD, rows: 100, groups: [][]int{{0, 1}}, inPlace: []bool{true}},
		{hkv: 1, g: 4, d: 80, page: 64, lens: []int{601, 450, 300, 700}, queries: []int{40, 34, 1, 33},
			mask: backend.CausalLowerRight, layout: backend.BHSD, window: 200, softcap: 30, sinks: true, rows: 50, groups: [][]int{{0, 1, 3}},
			inPlace: []bool{false}},
		// A long split-KV sequence beside a short group: the split-KV
		// launch, on its own stream, ends after the group's kernels, and
		// the call's outputs must wait for it.
		{hkv: 1, g: 8, d: 128, page: 64, lens: []int{16000, 64}, queries: []int{1, 64},
			mask: backend.CausalLowerRight, layout: backend.BHSD, rows: 100, groups: [][]int{{1}}, inPlace: []bool{true}},
		// Every sequence in a group: no split-KV launch. (D 64: each
		// sequence longer than the one-tile form's keys, which a sequence
		// alone would run on, with other arithmetic than the group's tiled
		// form.)
		{hkv: 2, g: 2, d: 64, page: 64, lens: []int{300, 400}, queries: []int{64, 50},
			mask: backend.CausalLowerRight, layout: backend.BSHD, rows: 1, groups: [][]int{{0, 1}}, inPlace: []bool{false}},
		// Two sequences in place in BHSD (a batch stride of n rows within
		// each head's T), without LSE.
		{hkv: 2, g: 2, d: 64, page: 64, lens: []int{300, 400, 90}, queries: []int{64, 64, 1},
			mask: backend.CausalLowerRight, layout: backend.BHSD, rows: 100, groups: [][]int{{0, 1}}, inPlace: []bool{true}, noLSE: true},
	} {
		t.Run(c.name(), func(t *testing.T) { runPagedVarlen(t, d, be, c, rng) })
	}
}

func runPagedVarlen(t *testing.T, d *device, be *kernelBackend, c varlenCase, rng *rand.Rand) {
	kv, table, per := filledCache(t, be, rng, c.hkv, c.d, c.page, c.lens)
	defer kv.Close()
	s := kv.(*pagedKV)
	hq := c.hkv * c.g
	nb := len(c.lens)
	p := &backend.PagedProblem{B: nb, Hq: hq, Hkv: c.hkv, Sq: slices.Max(c.queries), D: c.d, Scale: float32(1 / math.Sqrt(float64(c.d))),
		Mask: c.mask, Layout: c.layout, PagesPerSeq: per, BlockTable: table, Precision: backend.FP8E4M3,
		SeqLens: make([]int32, nb), QStarts: make([]int32, nb+1)}
	for b, n := range c.lens {
		p.SeqLens[b] = int32(n)
		p.QStarts[b+1] = p.QStarts[b] + int32(c.queries[b])
	}
	total := p.Rows()
	p.Q, p.Out, p.LSE = make([]float32, total*hq*c.d), make([]float32, total*hq*c.d), make([]float32, total*hq)
	if c.noLSE {
		p.LSE = nil
	}
	for i := range p.Q {
		p.Q[i] = float32(rng.NormFloat64())
	}
	p.SlidingWindow, p.Softcap = c.window, c.softcap
	if c.sinks {
		p.Sinks = normalSinks(rng, hq, 0, 2)
	}
	s.prefillRows = c.rows
	groups := s.varlenGroups(p)
	var got [][]int
	inGroup := make([]bool, nb)
	for _, g := range groups {
		got = append(got, g.seqs)
		for _, b := range g.seqs {
			inGroup[b] = true
		}
	}
	if d.ComputeCapability == 90 && fmt.Sprint(got) != fmt.Sprint(c.groups) {
		t.Fatalf("groups %v, want %v", got, c.groups)
	}
	for i, g := range groups {
		if _, ok := inPlace(p, g); d.ComputeCapability == 90 && ok != c.inPlace[i] {
			t.Errorf("group %v in place %v, want %v", g.seqs, ok, c.inPlace[i])
		}
	}
	if len(groups) == 0 {
		t.Skipf("no group runs on the prefill kernels of compute capability %d", d.ComputeCapability)
	}
	if err := kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	// Large values in the group buffer's rows (padding rows included) stand
	// for what an earlier call left. The side stream, where the call has
	// split-KV rows, is kept busy first (a few hundred microseconds of
	// memsets), so that its launch ends after the groups' kernels: the
	// call's outputs must wait for it.
	busy, err := d.Alloc(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Free()
	err = d.do(func() error {
		if b, ok := s.stage["varlen q"]; ok {
			if err := cu.MemsetD32Async(b.p, uint(math.Float32bits(3e38)), b.size/4, d.stream); err != nil {
				return err
			}
		}
		for i := 0; s.side.made && i < 8; i++ {
			if err := cu.MemsetD32Async(busy.buf.p, uint(i), busy.n/4, s.side.stream); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	// The split-KV kernel's items: exactly the other sequences' rows.
	var planned []int
	for i := 0; i < len(s.varBlocks); i += 2 {
		if b := int(s.varBlocks[i]); len(planned) == 0 || planned[len(planned)-1] != b {
			planned = append(planned, b)
		}
	}
	var want []int
	for b := range nb {
		if !inGroup[b] && c.queries[b] > 0 {
			want = append(want, b)
		}
	}
	if fmt.Sprint(planned) != fmt.Sprint(want) {
		t.Errorf("the split-KV kernel ran sequences %v, want %v", planned, want)
	}

	// Each sequence alone: a group's as a paged prefill call, bit for bit;
	// the others as FP32 calls.
	for b := range nb {
		m := c.queries[b]
		if m == 0 {
			continue
		}
		pb := *p
		pb.B, pb.Sq, pb.QStarts, pb.SeqLens, pb.BlockTable = 1, m, nil, p.SeqLens[b:b+1], p.BlockTable[b*per:(b+1)*per]
		pb.Q, pb.Out, pb.LSE = make([]float32, hq*m*c.d), make([]float32, hq*m*c.d), make([]float32, hq*m)
		for h := range hq {
			for i := range m {
				copy(pb.Q[c.layout.Offset(0, h, i, hq, m, c.d):][:c.d], p.Q[p.QOffset(b, h, i):][:c.d])
			}
		}
		if !inGroup[b] {
			pb.Precision = backend.FP32
		}
		s.prefillRows = 1
		if inGroup[b] && s.prefillStage(&pb) == 0 {
			t.Fatalf("sequence %d alone does not run on the prefill kernels", b)
		}
		if err := kv.Attention(&pb); err != nil {
			t.Fatal(err)
		}
		s.prefillRows = c.rows
		out, lse := make([]float32, hq*m*c.d), make([]float32, hq*m)
		for h := range hq {
			for i := range m {
				copy(out[c.layout.Offset(0, h, i, hq, m, c.d):][:c.d], p.Out[p.QOffset(b, h, i):][:c.d])
				if !c.noLSE {
					lse[h*m+i] = p.LSE[h*total+int(p.QStarts[b])+i]
				}
			}
		}
		what := fmt.Sprintf("sequence %d (%d queries)", b, m)
		switch {
		case inGroup[b]:
			sameBits(t, what+"'s out", out, pb.Out)
			if !c.noLSE {
				sameBits(t, what+"'s lse", lse, pb.LSE)
			}
		default:
			if e := relL2(out, pb.Out); !(e <= 0x1p-16) {
				t.Errorf("%s: output %.3g from alone (relative L2; at most 2^-16)", what, e)
			}
			if e := relL2(lse, pb.LSE); !c.noLSE && !(e <= 0x1p-16) {
				t.Errorf("%s: LSE %.3g from alone (relative L2; at most 2^-16)", what, e)
			}
		}
	}

	// The same call on device buffers.
	sameOnDevice(t, d, kv, p)
}

// relL2 is ‖got - want‖ / ‖want‖ in float64 (NaN where either holds one).
func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		num += e * e
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// BenchmarkPagedVarlenParts: the device time of a varlen FP8 step's parts
// (CUDA events around batches of 10 calls issued back to back; uploads
// cannot be captured): 4 sequences (or 1) with 512 new queries and 60 with
// one, 4096-8191 cached tokens each, spread over the chunks and over the
// tokens as in BenchmarkKVCacheMixedGPU (each sequence's own pages), Hq32
// Hkv8 D128, lower-right causal, queries and outputs in device memory.
// "call" is the whole call, "tokens" the split-KV launch on the tokens'
// rows with its inputs, "group" the chunks' group (its tables' upload, its
// inputs and prefill kernels, on the packed tensors in place), "copies"
// what a group's copies would cost (queries into a tensor of its own,
// outputs back), "prefill" the chunks as a paged prefill call of their own
// (queries and outputs not packed), "call-inline" the call with its
// split-KV launch on the device's stream before the group, not beside it;
// "call-host" the call host-timed (batches of 10 and the wait).
func BenchmarkPagedVarlenParts(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	for _, chunks := range []int{4, 1} {
		b.Run(fmt.Sprintf("chunks%d", chunks), func(b *testing.B) { benchVarlenParts(b, d, chunks) })
	}
}

func benchVarlenParts(b *testing.B, d *device, chunks int) {
	const hq, hkv, D, P, tokens, chunk = 32, 8, 128, 64, 60, 512
	nb := chunks + tokens
	longest := 8191 + chunk
	per := (longest + P - 1) / P
	kv, err := testBackend(0).NewPagedKV(backend.PagedConfig{KVHeads: hkv, HeadDim: D, PageSize: P, Pages: nb * per})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	a := &backend.PagedAppend{B: 1, N: longest, K: make([]float32, hkv*longest*D), V: make([]float32, hkv*longest*D)}
	for i := range a.K {
		a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	a.Page, a.Slot = make([]int32, longest), make([]int32, longest)
	for i := range nb { // the same tokens in each sequence's own pages
		for tk := range longest {
			a.Page[tk], a.Slot[tk] = int32(i*per+tk/P), int32(tk%P)
		}
		if err := kv.Append(a); err != nil {
			b.Fatal(err)
		}
	}
	p := &backend.PagedProblem{B: nb, Hq: hq, Hkv: hkv, D: D, Scale: 0.088, Mask: backend.CausalLowerRight, PagesPerSeq: per,
		Precision: backend.FP8E4M3, SeqLens: make([]int32, nb), BlockTable: make([]int32, nb*per), QStarts: make([]int32, nb+1)}
	// Cached tokens: 4096 to 8191 over the chunks, and again over the
	// tokens (BenchmarkKVCacheMixedGPU's); one chunk has 8191.
	spread := func(i, n int) int {
		if n == 1 {
			return 8191
		}
		return 4096 + i*4095/(n-1)
	}
	for i := range nb {
		q, cached := 1, spread(i-chunks, tokens)
		if i < chunks {
			q, cached = chunk, spread(i, chunks)
		}
		p.SeqLens[i] = int32(cached + q)
		p.QStarts[i+1] = p.QStarts[i] + int32(q)
		p.Sq = max(p.Sq, q)
		for j := range per {
			p.BlockTable[i*per+j] = int32(i*per + j)
		}
	}
	nq := 4 * int64(p.Rows()) * hq * D
	bq, err1 := d.Alloc(nq)
	bo, err2 := d.Alloc(nq)
	if err := errors.Join(err1, err2, bq.Zero()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = errors.Join(bq.Free(), bo.Free()) }()
	p.QBuf, p.OutBuf = bq, bo
	s := kv.(*pagedKV)
	s.poison = false
	groups := s.varlenGroups(p)
	if len(groups) != 1 {
		b.Fatalf("groups %v, want one", groups)
	}
	g := groups[0]
	skip := make([]bool, nb)
	for _, b := range g.seqs {
		skip[b] = true
	}
	sub := g.sub
	sub.QBuf, sub.OutBuf = bq, bo
	var times [7][]float64
	err = d.do(func() error {
		if err := d.flagFor(bo); err != nil {
			return err
		}
		q, out, flag := uint64(bq.buf.p), uint64(bo.buf.p), bo.flag
		size := 4 * int64(len(g.seqs)) * hq * int64(g.n) * D
		gq, err1 := s.buf("varlen q", size)
		gout, err2 := s.buf("varlen out", size)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		parts := []func() error{
			func() error { return s.varlen(p, groups) },
			func() error {
				gx, gy, gz := s.planSkipping(p, skip)
				_, err := s.stageInputs(p, nil)
				return errors.Join(err, s.launchAttention(gx, gy, gz))
			},
			func() error {
				var copies []hostCopy
				io := varlenIO{q: q, out: out, flag: flag}
				io.lens, err1 = s.put(&copies, "varlen tables", bytesOf(append(sub.SeqLens, sub.BlockTable...)))
				io.table = io.lens + 4*uint64(len(sub.SeqLens))
				return errors.Join(err1, s.dev.upload(copies), s.runGroup(p, g, io))
			},
			func() error { return errors.Join(s.gatherGroup(p, g, q, gq), s.scatterGroup(p, g, out, 0, gout, 0)) },
			func() error { return s.prefill(&sub, g.st) },
			func() error {
				s.varlenInline = true
				defer func() { s.varlenInline = false }()
				return s.varlen(p, groups)
			},
		}
		for i, f := range parts {
			var err error
			if times[i], err = d.timeCalls(100, false, f); err != nil {
				return err
			}
		}
		// The whole call host-timed: batches of 10 calls and the wait.
		for range 10 {
			start := time.Now()
			for range 10 {
				if err := s.varlen(p, groups); err != nil {
					return err
				}
			}
			if err := d.stream.Synchronize(); err != nil {
				return err
			}
			times[6] = append(times[6], float64(time.Since(start).Microseconds())/10)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for i, name := range []string{"call", "tokens", "group", "copies", "prefill", "call-inline", "call-host"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(median(times[i]), "us/call")
		})
	}
}
