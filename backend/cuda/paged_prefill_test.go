//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// prefillCase is a chunk of sq new queries against b sequences of n
// cached tokens each, or of ns[i] tokens the i-th where ns is not nil.
type prefillCase struct {
	hkv, g, sq, d, page, b, n int
	ns                        []int
	mask                      backend.Mask
	layout                    backend.Layout
	window                    int
	softcap                   float32
	sinks                     bool
}

func (c prefillCase) name() string {
	n := fmt.Sprint(c.n)
	if c.ns != nil {
		n = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(c.ns)), "_"), "[]")
	}
	return fmt.Sprintf("hkv%d-g%d-sq%d-d%d-p%d-b%d-n%s-%v-%v-w%d-c%g-s%v", c.hkv, c.g, c.sq, c.d, c.page, c.b, n, c.mask, c.layout, c.window, c.softcap, c.sinks)
}

// lens is each sequence's tokens.
func (c prefillCase) lens() []int {
	if c.ns != nil {
		return c.ns
	}
	ns := make([]int, c.b)
	for i := range ns {
		ns[i] = c.n
	}
	return ns
}

// TestPagedPrefillMatchesDense: a call with FP8 queries and many rows runs
// on the prefill kernels, and gives bit for bit what the dense FP8 call gives
// on a host model of its inputs, sequence by sequence: the queries
// quantized per (sequence, head) by fp8.QuantizeE4M3, each sequence's keys
// and values read back page by page (ReadPage) and re-encoded at the
// largest of its pages' scales (fp8.ToE4M3 of code·ratio, SatFinite: the
// append's rounding). The cached tokens mix magnitudes 2^20 apart so that
// pages hold different scales, their codes are re-encoded and some fall to
// subnormals or zero; pages are shuffled, and the last one is partly
// filled. Sequences of different lengths (on Hopper) see their own keys
// only, the gathered codes past a shorter one's last key left NaN by the
// call before. Outputs are poisoned on the device first; the device-buffer
// form (PagedProblem.QBuf) must give the same bits as the host-slice form.
func TestPagedPrefillMatchesDense(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x9F11)
	be.pagedPrefillRows = 1
	d.splitsForced = 1 // the dense call's rounding: no key split (TestKeySplit)
	t.Cleanup(func() { d.splitsForced = 0 })
	for _, c := range []prefillCase{
		{hkv: 2, g: 4, sq: 64, d: 128, page: 64, b: 1, n: 700, mask: backend.CausalLowerRight, layout: backend.BHSD},
		{hkv: 1, g: 2, sq: 130, d: 64, page: 64, b: 2, n: 300, mask: backend.NoMask, layout: backend.BSHD},
		{hkv: 2, g: 2, sq: 64, d: 64, page: 64, b: 2, n: 200, mask: backend.CausalLowerRight, layout: backend.BSHD},
		{hkv: 2, g: 1, sq: 96, d: 256, page: 128, b: 1, n: 333, mask: backend.CausalLowerRight, layout: backend.BSHD, window: 100},
		{hkv: 1, g: 4, sq: 40, d: 80, page: 64, b: 3, n: 200, mask: backend.CausalLowerRight, layout: backend.BHSD, softcap: 30, sinks: true},
		{hkv: 4, g: 2, sq: 200, d: 96, page: 32, b: 1, n: 200, mask: backend.CausalLowerRight, layout: backend.BHSD},
		// More query chunks of 32 rows than an H200 has SMs: longer chunks.
		{hkv: 1, g: 1, sq: 4500, d: 128, page: 64, b: 1, n: 4600, mask: backend.CausalLowerRight, layout: backend.BSHD},
		// Sequences of different lengths (stage 9 only).
		{hkv: 2, g: 4, sq: 64, d: 128, page: 64, b: 3, ns: []int{700, 333, 1000}, mask: backend.CausalLowerRight, layout: backend.BHSD},
		{hkv: 1, g: 2, sq: 130, d: 64, page: 64, b: 3, ns: []int{300, 520, 260}, mask: backend.NoMask, layout: backend.BSHD},
		{hkv: 2, g: 1, sq: 96, d: 256, page: 128, b: 2, ns: []int{333, 900}, mask: backend.CausalLowerRight, layout: backend.BSHD, window: 100},
		{hkv: 1, g: 4, sq: 40, d: 80, page: 64, b: 3, ns: []int{300, 450, 601}, mask: backend.CausalLowerRight, layout: backend.BHSD, softcap: 30, sinks: true, window: 200},
		// Pages of 96 keys (not a power of two): a gather block's tiles cross pages.
		{hkv: 2, g: 4, sq: 64, d: 128, page: 96, b: 1, n: 650, mask: backend.CausalLowerRight, layout: backend.BHSD},
		{hkv: 2, g: 2, sq: 48, d: 64, page: 96, b: 2, ns: []int{500, 333}, mask: backend.NoMask, layout: backend.BSHD},
		// ... in one tile (V transposed by the kernel, from the V tensor).
		{hkv: 1, g: 2, sq: 40, d: 64, page: 64, b: 2, ns: []int{250, 90}, mask: backend.CausalLowerRight, layout: backend.BHSD},
	} {
		t.Run(c.name(), func(t *testing.T) { runPagedPrefill(t, d, be, c, rng) })
	}
}

// sequenceCall is sequence b of p (per pages a sequence) as a call of its
// own: views of p's queries, outputs, LSEs, lengths and block table.
func sequenceCall(p *backend.PagedProblem, b, per int) *backend.PagedProblem {
	qn, ln := p.Hq*p.Sq*p.D, p.Hq*p.Sq
	pb := *p
	pb.B, pb.SeqLens, pb.BlockTable = 1, p.SeqLens[b:b+1], p.BlockTable[b*per:(b+1)*per]
	pb.Q, pb.Out, pb.LSE = p.Q[b*qn:(b+1)*qn], p.Out[b*qn:(b+1)*qn], p.LSE[b*ln:(b+1)*ln]
	return &pb
}

// problem is c's call at FP8E4M3 over a cache filled as filledCache's
// table and per say: random queries (and sinks), host slices.
func (c prefillCase) problem(rng *rand.Rand, table []int32, per int) *backend.PagedProblem {
	ns := c.lens()
	hq := c.hkv * c.g
	nq := c.b * hq * c.sq * c.d
	p := &backend.PagedProblem{B: c.b, Hq: hq, Hkv: c.hkv, Sq: c.sq, D: c.d, Scale: float32(1 / math.Sqrt(float64(c.d))), Mask: c.mask,
		Layout: c.layout, PagesPerSeq: per, BlockTable: table, Q: make([]float32, nq), Out: make([]float32, nq),
		LSE: make([]float32, c.b*hq*c.sq), Precision: backend.FP8E4M3}
	p.SeqLens = make([]int32, c.b)
	for b, n := range ns {
		p.SeqLens[b] = int32(n)
	}
	for i := range p.Q {
		p.Q[i] = float32(rng.NormFloat64())
	}
	p.SlidingWindow, p.Softcap = c.window, c.softcap
	if c.sinks {
		p.Sinks = normalSinks(rng, hq, 0, 2)
	}
	return p
}

func runPagedPrefill(t *testing.T, d *device, be *kernelBackend, c prefillCase, rng *rand.Rand) {
	ns := c.lens()
	kv, table, per := filledCache(t, be, rng, c.hkv, c.d, c.page, ns)
	defer kv.Close()
	p := c.problem(rng, table, per)
	s := kv.(*pagedKV)
	st := s.prefillStage(p)
	switch {
	case st == 0 && d.ComputeCapability == 90:
		t.Fatal("the call does not run on the prefill kernels")
	case st == 0:
		t.Skipf("no FP8 prefill stage of compute capability %d takes the shape", d.ComputeCapability)
	}
	// A first call makes the gathered codes' buffers; NaN codes in them
	// (0xFF) stand for what an earlier call of longer sequences left.
	if err := kv.Attention(p); err != nil {
		t.Fatal(err)
	}
	err := d.do(func() error {
		for _, use := range []string{"k8", "v8"} {
			b := s.stage[use]
			if err := cu.MemsetD8Async(b.p, 0xFF, b.size, d.stream); err != nil {
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
	// Each sequence alone, as a dense call of its own length.
	for b, n := range ns {
		pb := sequenceCall(p, b, per)
		dense, err := denseModel(kv, pb, n)
		if err != nil {
			t.Fatal(err)
		}
		r, err := d.Upload(dense)
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(r.Poison(), r.Run(st)); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(r.Download(dense.Out, dense.LSE), r.Free()); err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("sequence %d's out", b), pb.Out, dense.Out)
		sameBits(t, fmt.Sprintf("sequence %d's lse", b), pb.LSE, dense.LSE)
	}

	sameOnDevice(t, d, kv, p)
}

// sameOnDevice runs p, a call kv has run on host slices, again on device
// buffers (PagedProblem.QBuf), and holds its outputs to the host slices'
// bits.
func sameOnDevice(t *testing.T, d *device, kv backend.PagedKV, p *backend.PagedProblem) {
	t.Helper()
	bq, err1 := d.Alloc(4 * int64(len(p.Q)))
	bo, err2 := d.Alloc(4 * int64(len(p.Out)))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = errors.Join(bq.Free(), bo.Free()) }()
	if err := bq.Write(bytesOf(p.Q)); err != nil {
		t.Fatal(err)
	}
	dp := *p
	dp.Q, dp.Out, dp.LSE, dp.QBuf, dp.OutBuf = nil, nil, nil, bq, bo
	var bl *buffer // (an LSE where p has one)
	if p.LSE != nil {
		var err error
		if bl, err = d.Alloc(4 * int64(len(p.LSE))); err != nil {
			t.Fatal(err)
		}
		defer bl.Free()
		dp.LSEBuf = bl
	}
	if err := kv.Attention(&dp); err != nil {
		t.Fatal(err)
	}
	out, lse := make([]float32, len(p.Out)), make([]float32, len(p.LSE))
	if err := bo.Read(bytesOf(out)); err != nil {
		t.Fatal(err)
	}
	if bl != nil {
		if err := bl.Read(bytesOf(lse)); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "device out", out, p.Out)
	sameBits(t, "device lse", lse, p.LSE)
}

// poisonHost sets p's host outputs and LSEs to NaN, so that a value the
// call does not write fails the comparison after it.
func poisonHost(p *backend.PagedProblem) {
	for i := range p.Out {
		p.Out[i] = float32(math.NaN())
	}
	for i := range p.LSE {
		p.LSE[i] = float32(math.NaN())
	}
}

// filledCache makes a paged cache of be with sequences of ns[b] tokens
// each (cacheOf), their values of magnitudes 2^20 apart so that pages
// hold different scales, and a gathered sequence re-encodes some of its
// codes (some fall to subnormals or zero).
func filledCache(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int) (kv backend.PagedKV, table []int32, per int) {
	t.Helper()
	return cacheOf(t, be, rng, hkv, d, page, ns, func(_, tk, h int) float32 {
		return float32(rng.NormFloat64() * pageMagnitude(tk, h, page))
	})
}

// pageMagnitude is the magnitude of token tk's values in KV head h of
// filledCache's pages: a page of small values, a page of large ones, a
// page of both, in turn by page index.
func pageMagnitude(tk, h, page int) float64 {
	if (tk/page+h)%3 == 2 && tk%7 == 0 {
		return 1e3
	}
	return [3]float64{1, 1e-3, 1}[(tk/page+h)%3]
}

// cacheOf makes a paged cache of be with sequences of ns[b] tokens each,
// their pages shuffled (the block table, per pages a sequence), and
// appends their tokens: element i of KV head h of token tk value(i, tk,
// h), K's then V's, each in order.
func cacheOf(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int, value func(i, tk, h int) float32) (kv backend.PagedKV, table []int32, per int) {
	t.Helper()
	per = (max(1, slices.Max(ns)) + page - 1) / page
	cfg := backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: page, Pages: len(ns)*per + 2}
	kv, err := be.NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	perm := rng.Perm(cfg.Pages)
	table = make([]int32, len(ns)*per)
	for i := range table {
		table[i] = int32(perm[i])
	}
	for b, n := range ns {
		if n == 0 {
			continue
		}
		// The last page is filled whole: its slots past n hold codes, as
		// a sequence truncated to n leaves them (which the calls weigh by
		// exactly 0, or leave out).
		n = (n + page - 1) / page * page
		a := &backend.PagedAppend{B: 1, N: n, Layout: backend.BHSD}
		for tk := range n {
			a.Page = append(a.Page, table[b*per+tk/page])
			a.Slot = append(a.Slot, int32(tk%page))
		}
		a.K, a.V = make([]float32, hkv*n*d), make([]float32, hkv*n*d)
		for _, x := range [][]float32{a.K, a.V} {
			for h := range hkv {
				for tk := range n {
					for i := range d {
						x[(h*n+tk)*d+i] = value(i, tk, h)
					}
				}
			}
		}
		if err := kv.Append(a); err != nil {
			kv.Close()
			t.Fatal(err)
		}
	}
	return kv, table, per
}

// prefillTestDevice opens device 0 for the FP8 prefill tests (skipping t
// where it has no FP8 prefill kernel), with a test backend and a generator
// of stream stream from a logged seed.
func prefillTestDevice(t *testing.T, stream uint64) (*device, *kernelBackend, *rand.Rand) {
	t.Helper()
	seed := sdpatest.Seed()
	t.Logf("seed %d", seed)
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	if d.stageCapability() < 89 {
		t.Skipf("compute capability %d has no FP8 prefill kernel", d.ComputeCapability)
	}
	return d, testBackend(0), rand.New(rand.NewPCG(seed, stream))
}

// denseModel is the dense FP8 problem a prefill call of p over sequences of
// n tokens computes: its queries quantized per (sequence, head), each
// sequence's cached keys and values re-encoded at one scale per KV head.
func denseModel(kv backend.PagedKV, p *backend.PagedProblem, n int) (*backend.Problem, error) {
	D, P := p.D, kv.Config().PageSize
	rd, ok := kv.(backend.PagedReader)
	if !ok {
		return nil, errors.New("the cache cannot read its pages")
	}
	dp := &backend.Problem{
		Shape: backend.Shape{B: p.B, Hq: p.Hq, Hkv: p.Hkv, Sq: p.Sq, Sk: n, D: D},
		Scale: p.Scale, Mask: p.Mask, Layout: p.Layout, Precision: backend.FP8E4M3, Variants: p.Variants,
		Q8: make([]fp8.E4M3, len(p.Q)), K8: make([]fp8.E4M3, p.B*p.Hkv*n*D), V8: make([]fp8.E4M3, p.B*p.Hkv*n*D),
		QScale: make([]float32, p.B*p.Hq), KScale: make([]float32, p.B*p.Hkv), VScale: make([]float32, p.B*p.Hkv),
		Out: make([]float32, len(p.Q)), LSE: make([]float32, p.B*p.Hq*p.Sq),
	}
	head := make([]float32, p.Sq*D)
	codes := make([]fp8.E4M3, p.Sq*D)
	for b := range p.B {
		for h := range p.Hq {
			bs, hs, rs := p.Layout.Strides(p.Hq, p.Sq, D)
			for i := range p.Sq {
				copy(head[i*D:(i+1)*D], p.Q[b*bs+h*hs+i*rs:][:D])
			}
			if err := fp8.QuantizeE4M3Into(codes, dp.QScale[b*p.Hq+h:][:1], head, len(head)); err != nil {
				return nil, err
			}
			for i := range p.Sq {
				copy(dp.Q8[b*bs+h*hs+i*rs:][:D], codes[i*D:(i+1)*D])
			}
		}
	}
	k, v := make([]fp8.E4M3, P*D), make([]fp8.E4M3, P*D)
	bs, hs, rs := p.Layout.Strides(p.Hkv, n, D)
	for b := range p.B {
		pages := p.BlockTable[b*p.PagesPerSeq:][:(n+P-1)/P]
		for h := range p.Hkv {
			var ks, vs []float32
			for _, pg := range pages {
				kss, vss, err := rd.ReadPage(int(pg), h, k, v)
				if err != nil {
					return nil, err
				}
				ks, vs = append(ks, kss), append(vs, vss)
			}
			sk, sv := slicesMax(ks), slicesMax(vs)
			if sk == 0 {
				sk = 1
			}
			if sv == 0 {
				sv = 1
			}
			dp.KScale[b*p.Hkv+h], dp.VScale[b*p.Hkv+h] = sk, sv
			for i, pg := range pages {
				if _, _, err := rd.ReadPage(int(pg), h, k, v); err != nil {
					return nil, err
				}
				rk, rv := ks[i]/sk, vs[i]/sv
				for j := range min(P, n-i*P) {
					at := b*bs + h*hs + (i*P+j)*rs
					for e := range D {
						dp.K8[at+e] = reencode(k[j*D+e], rk)
						dp.V8[at+e] = reencode(v[j*D+e], rv)
					}
				}
			}
		}
	}
	return dp, dp.Validate()
}

// reencode is the gather's rescale of one code (a no-op at ratio 1).
func reencode(c fp8.E4M3, ratio float32) fp8.E4M3 {
	if ratio == 1 {
		return c
	}
	return fp8.ToE4M3(c.Float32()*ratio, fp8.SatFinite)
}

func slicesMax(x []float32) float32 {
	m := float32(0)
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// sameBits fails t at the first of got's elements whose bits differ from
// want's, with how many differ.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	first, n := -1, 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n > 0 {
		t.Errorf("%s: %d of %d elements differ, first %d: %v, want %v", what, n, len(want), first, got[first], want[first])
	}
}

// TestPagedPrefillChoice: which calls run on the prefill kernels: only
// FP8E4M3 calls of enough query rows over sequences no shorter than the
// queries, outside a capture and without device tables (on Hopper, all of
// those at D 128, sequences of different lengths included; elsewhere only
// sequences of one length).
func TestPagedPrefillChoice(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := backend.PagedConfig{KVHeads: 2, HeadDim: 128, PageSize: 64, Pages: 40}
	kv, err := testBackend(0).NewPagedKV(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	s := kv.(*pagedKV)
	base := func() *backend.PagedProblem {
		return &backend.PagedProblem{B: 2, Hq: 8, Hkv: 2, Sq: 512, D: 128, Scale: 0.1, Mask: backend.CausalLowerRight,
			PagesPerSeq: 63, SeqLens: []int32{4000, 4000}, BlockTable: make([]int32, 126), Precision: backend.FP8E4M3}
	}
	hopper := d.ComputeCapability == 90 && d.hopperErr == nil
	// many makes p a batch of sq queries a sequence with rows to spare.
	many := func(p *backend.PagedProblem, sq int) {
		p.Sq = sq
		p.B = (prefillRowsPerSM*d.SMs+p.Hq*sq-1)/(p.Hq*sq) + 1
		p.SeqLens, p.BlockTable = make([]int32, p.B), make([]int32, p.B*p.PagesPerSeq)
		for i := range p.SeqLens {
			p.SeqLens[i] = 4000
		}
	}
	for _, c := range []struct {
		name string
		edit func(p *backend.PagedProblem)
		want bool
	}{
		{"fp8 chunk", func(*backend.PagedProblem) {}, true},
		{"fp32", func(p *backend.PagedProblem) { p.Precision = backend.FP32 }, false},
		{"lengths differ", func(p *backend.PagedProblem) { p.SeqLens[1] = 999 }, hopper},
		{"a sequence shorter than the queries", func(p *backend.PagedProblem) { p.SeqLens[1] = 511 }, false},
		{"few rows", func(p *backend.PagedProblem) { p.B, p.Hq, p.Sq = 1, 2, (prefillRowsPerSM*d.SMs-1)/2 }, false},
		{"rows at the bound", func(p *backend.PagedProblem) { p.B, p.Hq, p.Sq = 1, 2, prefillRowsPerSM*d.SMs/2 }, true},
		{"many rows, few queries a sequence", func(p *backend.PagedProblem) { many(p, prefillMinQueries-1) }, false},
		{"queries at the bound", func(p *backend.PagedProblem) { many(p, prefillMinQueries) }, true},
		{"device tables", func(p *backend.PagedProblem) { p.Tables = &pagedTables{} }, false},
	} {
		p := base()
		c.edit(p)
		got := s.prefillStage(p) != 0
		if got && !c.want || !got && c.want && hopper { // (elsewhere the stage may not take D 128)
			t.Errorf("%s: prefill %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkPagedPrefillRows: where the prefill kernels overtake the
// split-KV kernels. B1 Hkv8 D128, Hq 8, 32 or 64, 2048-32768 cached tokens plus Sq new ones,
// lower-right causal, FP8 queries in device memory, each call run on the
// split-KV kernels ("paged") and on the prefill kernels ("prefill"),
// host-timed: batches of calls back to back and a wait for the stream.
func BenchmarkPagedPrefillRows(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	for _, sc := range [][3]int{ // query heads, cached tokens, new positions
		{32, 8192, 32}, {32, 8192, 64}, {32, 8192, 96}, {32, 8192, 128}, {32, 8192, 256},
		{32, 2048, 64}, {32, 2048, 96}, {32, 2048, 128}, {32, 32768, 64}, {32, 32768, 128},
		{64, 8192, 64}, {64, 8192, 96}, {64, 8192, 128}, {8, 8192, 64}, {8, 8192, 96}, {8, 8192, 128},
	} {
		hq, cached, sq := sc[0], sc[1], sc[2]
		for _, path := range []struct {
			name  string
			least int
		}{{"paged", -1}, {"prefill", 1}} {
			kv, p, free := prefillBenchCall(b, d, &kernelBackend{name: "cuda", pagedPrefillRows: path.least}, hq, cached+sq, sq, uint64(sq))
			b.Run(fmt.Sprintf("hq%d/cached%d/sq%d/%s", hq, cached, sq, path.name), func(b *testing.B) { timePagedCalls(b, d, kv, p, 50) })
			free()
		}
	}
}

// BenchmarkPagedPrefillParts: the device time of a prefill call's parts,
// each captured in a graph and replayed between CUDA events (timeCalls):
// its inputs (the queries quantized, the cache gathered: one launch), the
// stage over them, the two together, and the whole call issued directly
// (uploads included). B1 Hq32 Hkv8 D128, 8192 cached tokens plus Sq new ones.
func BenchmarkPagedPrefillParts(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	const hq, cached = 32, 8192
	for _, sq := range []int{128, 2048} {
		n := cached + sq
		kv, p, free := prefillBenchCall(b, d, &kernelBackend{name: "cuda", pagedPrefillRows: 1}, hq, n, sq, 2<<32|uint64(sq))
		s := kv.(*pagedKV)
		st := s.prefillStage(p)
		var times [4][]float64
		err = d.do(func() error {
			pc, err := s.prefillInputs(p)
			if err != nil {
				return err
			}
			pr := prefillProblem(p, n)
			r, err := d.residentFor(&pr, pc.in, pc.out, pc.lse)
			if err != nil {
				return err
			}
			defer r.release()
			if err := r.setUp(pc.in, pc.out, pc.lse); err != nil {
				return err
			}
			img, err := r.prefillVImage(st)
			if err != nil {
				return err
			}
			inputs := func() error { return s.prefillInputsLaunch(p, pc, img) }
			stage := func() error { r.vImageWritten = img != nil; return r.launch(st) }
			parts := []func() error{inputs, stage, func() error { return errors.Join(inputs(), stage()) }}
			for i, f := range parts {
				if times[i], err = d.timeCalls(100, true, f); err != nil {
					return err
				}
			}
			times[3], err = d.timeCalls(100, false, func() error { return s.prefill(p, st) })
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		for i, name := range []string{"inputs", "stage", "kernels", "call"} {
			b.Run(fmt.Sprintf("sq%d/%s", sq, name), func(b *testing.B) {
				for b.Loop() {
				}
				b.ReportMetric(median(times[i]), "us/call")
			})
		}
		free()
	}
}

// prefillBenchCall makes the prefill benchmarks' call on be's cache: one
// sequence of n tokens (N(0,1) keys and values from seed, Hkv 8, D 128, in
// pages of 64 in order), and an FP8E4M3 call of sq new queries (hq heads,
// lower-right causal) on zeroed device buffers. free releases all of it.
func prefillBenchCall(b testing.TB, d *device, be *kernelBackend, hq, n, sq int, seed uint64) (backend.PagedKV, *backend.PagedProblem, func()) {
	const hkv, D, P = 8, 128, 64
	per := (n + P - 1) / P
	kv, err := be.NewPagedKV(backend.PagedConfig{KVHeads: hkv, HeadDim: D, PageSize: P, Pages: per})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed>>32, seed&(1<<32-1)))
	a := &backend.PagedAppend{B: 1, N: n, K: make([]float32, hkv*n*D), V: make([]float32, hkv*n*D)}
	for i := range a.K {
		a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	table := make([]int32, per)
	for tk := range n {
		a.Page, a.Slot = append(a.Page, int32(tk/P)), append(a.Slot, int32(tk%P))
	}
	for i := range table {
		table[i] = int32(i)
	}
	nq := hq * sq * D
	bq, err1 := d.Alloc(4 * int64(nq))
	bo, err2 := d.Alloc(4 * int64(nq))
	if err := errors.Join(err1, err2, kv.Append(a), bq.Zero()); err != nil {
		b.Fatal(err)
	}
	p := &backend.PagedProblem{B: 1, Hq: hq, Hkv: hkv, Sq: sq, D: D, Scale: 0.088, Mask: backend.CausalLowerRight,
		PagesPerSeq: per, SeqLens: []int32{int32(n)}, BlockTable: table, QBuf: bq, OutBuf: bo, Precision: backend.FP8E4M3}
	return kv, p, func() {
		if err := errors.Join(bq.Free(), bo.Free(), kv.Close()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPagedCallsUploadOnce: a paged call on queries in device memory
// uploads its lengths and block table in one copy (putJoined, upload),
// on the prefill kernels and on the split-KV kernel.
func TestPagedCallsUploadOnce(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		name     string
		sq, rows int // new queries; the rows from which the prefill kernels run (-1: never)
	}{{"prefill", 128, 1}, {"split-KV", 128, -1}, {"decode", 1, -1}} {
		kv, p, free := prefillBenchCall(t, d, &kernelBackend{name: "cuda", pagedPrefillRows: c.rows}, 32, 1000+c.sq, c.sq, uint64(c.sq))
		if err := kv.Attention(p); err != nil { // (the first call sizes the buffers)
			t.Fatal(err)
		}
		before := uploadCopies.Load()
		if err := kv.Attention(p); err != nil {
			t.Fatal(err)
		}
		if n := uploadCopies.Load() - before; n != 1 {
			t.Errorf("%s: %d host-to-device copies, want 1 (lengths and block table together)", c.name, n)
		}
		free()
	}
}

// TestPagedVarlenUploadsOnce: a varlen call on queries in device memory
// uploads its tables in one copy (putJoined, upload): its lengths, block
// table, query starts and split-KV blocks, and at FP8E4M3 each group's
// lengths and block table with them (varlen), whether the group runs in
// place or on a copy of its queries, beside a split-KV launch or alone.
// At FP32 the batch is one split-KV launch. (The groups, not the packed
// form, which uploads its items with the tables in its one copy.)
func TestPagedVarlenUploadsOnce(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Skip(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x0C09))
	const hkv, hq, D, P = 2, 8, 128, 64
	for _, c := range []struct {
		name          string
		precision     backend.Precision
		lens, queries []int   // each sequence's tokens and new queries
		rows          int     // the cache's prefill threshold (pagedKV.prefillRows)
		groups        [][]int // the groups varlenGroups forms (at FP8E4M3, on Hopper)
		splitKV       bool    // the split-KV kernel runs some rows
	}{
		// A group copied out of the packed tensors (0, 2, 4), one in
		// place (5), and a decode token on the split-KV kernel.
		{"fp8-mixed", backend.FP8E4M3, []int{700, 90, 333, 64, 1000, 50}, []int{64, 1, 40, 0, 64, 40}, 100, [][]int{{0, 2, 4}, {5}}, true},
		// Every sequence in a group: no split-KV launch, its blocks an
		// empty piece among the joined ones.
		{"fp8-groups-only", backend.FP8E4M3, []int{300, 400}, []int{64, 50}, 1, [][]int{{0, 1}}, false},
		{"fp32", backend.FP32, []int{700, 90, 333, 64, 1000, 50}, []int{64, 1, 40, 0, 64, 40}, 100, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			kv, table, per := filledCache(t, testBackend(0), rng, hkv, D, P, c.lens)
			defer kv.Close()
			s := kv.(*pagedKV)
			s.prefillRows, s.groups = c.rows, true
			nb := len(c.lens)
			p := &backend.PagedProblem{B: nb, Hq: hq, Hkv: hkv, Sq: slices.Max(c.queries), D: D, Scale: float32(1 / math.Sqrt(D)),
				Mask: backend.CausalLowerRight, Layout: backend.BHSD, PagesPerSeq: per, BlockTable: table, Precision: c.precision,
				SeqLens: make([]int32, nb), QStarts: make([]int32, nb+1)}
			for b, n := range c.lens {
				p.SeqLens[b] = int32(n)
				p.QStarts[b+1] = p.QStarts[b] + int32(c.queries[b])
			}
			var got [][]int
			for _, g := range s.varlenGroups(p) {
				got = append(got, g.seqs)
			}
			if (c.precision == backend.FP32 || d.ComputeCapability == 90) && fmt.Sprint(got) != fmt.Sprint(c.groups) {
				t.Fatalf("groups %v, want %v", got, c.groups)
			}
			if c.groups != nil && got == nil {
				t.Skipf("no group runs on the prefill kernels of compute capability %d", d.ComputeCapability)
			}
			q := make([]float32, p.Rows()*hq*D)
			for i := range q {
				q[i] = float32(rng.NormFloat64())
			}
			bq, err1 := d.Alloc(4 * int64(len(q)))
			bo, err2 := d.Alloc(4 * int64(len(q)))
			bl, err3 := d.Alloc(4 * int64(p.Rows()*hq))
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = errors.Join(bq.Free(), bo.Free(), bl.Free()) }()
			if err := bq.Write(bytesOf(q)); err != nil {
				t.Fatal(err)
			}
			p.QBuf, p.OutBuf, p.LSEBuf = bq, bo, bl
			if err := kv.Attention(p); err != nil { // (the first call sizes the buffers)
				t.Fatal(err)
			}
			before := uploadCopies.Load()
			if err := kv.Attention(p); err != nil {
				t.Fatal(err)
			}
			if n := uploadCopies.Load() - before; n != 1 {
				t.Errorf("%d host-to-device copies, want 1 (the call's tables and its groups' together)", n)
			}
			if ran := len(s.varBlocks) > 0; ran != c.splitKV {
				t.Errorf("the split-KV kernel ran rows: %v, want %v", ran, c.splitKV)
			}
		})
	}
}

// timePagedCalls reports the µs a call of p on kv takes, host-timed: an
// iteration is reps calls back to back and a wait for d's stream (one
// batch first, untimed in effect: b.Loop starts the clock after it).
func timePagedCalls(b *testing.B, d *device, kv backend.PagedKV, p *backend.PagedProblem, reps int) {
	batch := func() {
		for range reps {
			if err := kv.Attention(p); err != nil {
				b.Fatal(err)
			}
		}
		if err := d.do(func() error { return d.stream.Synchronize() }); err != nil {
			b.Fatal(err)
		}
	}
	batch()
	for b.Loop() {
		batch()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*reps), "us/call")
}

// BenchmarkPagedPrefillBatch: the prefill kernels against the split-KV
// kernels for batches of many sequences with few new queries each (decode
// steps and speculative drafts at FP8E4M3): B sequences of 4096 cached
// tokens plus Sq new ones (each its own pages), Hq32 Hkv8 D128,
// lower-right causal, FP8 queries in device memory, host-timed as
// BenchmarkPagedPrefillRows.
func BenchmarkPagedPrefillBatch(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	const hq, hkv, D, P, cached = 32, 8, 128, 64, 4096
	for _, nb := range []int{16, 64} {
		for _, sq := range []int{1, 8, 16, 32, 64, 128} {
			n := cached + sq
			per := (n + P - 1) / P
			for _, path := range []struct {
				name  string
				least int
			}{{"paged", -1}, {"prefill", 1}} {
				kv, err := (&kernelBackend{name: "cuda", pagedPrefillRows: path.least}).NewPagedKV(backend.PagedConfig{KVHeads: hkv, HeadDim: D, PageSize: P, Pages: nb * per})
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(uint64(sq), 5))
				a := &backend.PagedAppend{B: 1, N: n, K: make([]float32, hkv*n*D), V: make([]float32, hkv*n*D), Page: make([]int32, n), Slot: make([]int32, n)}
				for i := range a.K {
					a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
				}
				p := &backend.PagedProblem{B: nb, Hq: hq, Hkv: hkv, Sq: sq, D: D, Scale: 0.088, Mask: backend.CausalLowerRight,
					PagesPerSeq: per, SeqLens: make([]int32, nb), BlockTable: make([]int32, nb*per), Precision: backend.FP8E4M3}
				for s := range nb {
					for tk := range n {
						a.Page[tk], a.Slot[tk] = int32(s*per+tk/P), int32(tk%P)
					}
					if err := kv.Append(a); err != nil {
						b.Fatal(err)
					}
					p.SeqLens[s] = int32(n)
					for j := range per {
						p.BlockTable[s*per+j] = int32(s*per + j)
					}
				}
				bq, err1 := d.Alloc(4 * int64(nb*hq*sq*D))
				bo, err2 := d.Alloc(4 * int64(nb*hq*sq*D))
				if err := errors.Join(err1, err2, bq.Zero()); err != nil {
					b.Fatal(err)
				}
				p.QBuf, p.OutBuf = bq, bo
				b.Run(fmt.Sprintf("b%d/sq%d/%s", nb, sq, path.name), func(b *testing.B) { timePagedCalls(b, d, kv, p, 20) })
				if err := errors.Join(bq.Free(), bo.Free(), kv.Close()); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
