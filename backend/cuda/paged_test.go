//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/internal/timing"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPagedConformance runs the paged-cache table (sdpatest.RunPaged: a model
// of the scale policy, shuffled pages, ragged lengths, chunks, growing
// scales, every result against the float64 oracle with the float32
// tolerances) on the GPU cache, outputs poisoned on the device before every
// call. The kernel computes at float32 accuracy: see kernels/paged.cu (the
// queries and weights as two f16 parts each, 22 bits together, products
// exact, f32 accumulation), inside FP32Tolerance's 16·eps32·(1+M).
// On a GPU with the warp-specialized kernel (Hopper) the table runs twice:
// with it, and with the cp.async kernel forced.
func TestPagedConformance(t *testing.T) {
	for _, be := range pagedBackends(t) {
		t.Run(pagedKernelName(be), func(t *testing.T) { sdpatest.RunPaged(t, be) })
	}
}

// TestPagedPTXModule runs the paged table on the compute_89 PTX of the paged
// module where the device would load its sm_90a cubin (Hopper): the build an
// Ada GPU runs, JIT-compiled here, which the other tests do not load.
func TestPagedPTXModule(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	if d.ComputeCapability != 90 {
		t.Skipf("compute capability %d loads the PTX anyway", d.ComputeCapability)
	}
	defer reopenWith(t, &forcePagedPTX)()
	if d, _ := openDevice(0); len(d.paged.ws) != 0 {
		t.Fatal("the PTX module has the warp-specialized kernel")
	}
	sdpatest.RunPaged(t, testBackend(0))
}

// pagedBackends are the test backends for each attention kernel this GPU
// runs: the default (warp-specialized where the device has it) and, where
// that is not the cp.async kernel, the cp.async kernel forced, and the
// warp-specialized kernel forced on three blocks (each walks several units,
// so that what one unit loads for the next is tested).
func pagedBackends(t *testing.T) []*kernelBackend {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	bes := []*kernelBackend{testBackend(0)}
	if len(d.paged.ws) > 0 {
		be := testBackend(0)
		be.pagedCpAsync = true
		bes = append(bes, be)
		be = testBackend(0)
		be.pagedWSBlocks = 3
		bes = append(bes, be)
	} else if d.ComputeCapability == 90 {
		t.Errorf("a Hopper GPU without the warp-specialized paged kernel: %v", d.pagedWSErr)
	}
	return bes
}

func pagedKernelName(be *kernelBackend) string {
	d, _ := openDevice(0)
	switch {
	case be.pagedCpAsync || len(d.paged.ws) == 0:
		return "cp.async"
	case be.pagedWSBlocks > 0:
		return fmt.Sprintf("ws-%d-blocks", be.pagedWSBlocks)
	}
	return "ws"
}

// diffPages compares every (page, head) block of two caches of config c,
// codes and scales bit for bit; a difference names the first block that
// differs, its scales, and which slots differ.
func diffPages(a, b backend.PagedReader, c backend.PagedConfig) error {
	n := c.PageSize * c.HeadDim
	ka, va, kb, vb := make([]fp8.E4M3, n), make([]fp8.E4M3, n), make([]fp8.E4M3, n), make([]fp8.E4M3, n)
	for pg := range c.Pages {
		for h := range c.KVHeads {
			ksa, vsa, err := a.ReadPage(pg, h, ka, va)
			if err != nil {
				return err
			}
			ksb, vsb, err := b.ReadPage(pg, h, kb, vb)
			if err != nil {
				return err
			}
			var slots []int
			first := -1
			for i := range ka {
				if ka[i] != kb[i] || va[i] != vb[i] {
					if first < 0 {
						first = i
					}
					if sl := i / c.HeadDim; len(slots) == 0 || slots[len(slots)-1] != sl {
						slots = append(slots, sl)
					}
				}
			}
			if first >= 0 || math.Float32bits(ksa) != math.Float32bits(ksb) || math.Float32bits(vsa) != math.Float32bits(vsb) {
				msg := fmt.Sprintf("page %d head %d: scales K %g V %g, want %g %g", pg, h, ksb, vsb, ksa, vsa)
				if first >= 0 {
					msg += fmt.Sprintf("; slots %v differ, first at slot %d dim %d: K %#x V %#x, want %#x %#x",
						slots, first/c.HeadDim, first%c.HeadDim, kb[first], vb[first], ka[first], va[first])
				}
				return errors.New(msg)
			}
		}
	}
	return nil
}

// flipOne is a reader that corrupts one code of one page: diffPages must
// catch it.
type flipOne struct{ backend.PagedReader }

func (f flipOne) ReadPage(page, head int, k, v []fp8.E4M3) (float32, float32, error) {
	ks, vs, err := f.PagedReader.ReadPage(page, head, k, v)
	if page == 1 && head == 0 {
		v[len(v)/2] ^= 1
	}
	return ks, vs, err
}

// TestPagedAppendBitExact: the same appends into a cpu cache and a GPU cache
// leave the same codes and scales in every page, bit for bit. The rows mix
// magnitudes so that pages grow their scales (and re-encode), values fall
// to E4M3's subnormals, rows are all zero or negative zero, and two batch
// entries write to one page (the GPU's launch waves).
func TestPagedAppendBitExact(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xB17))
	for _, c := range []backend.PagedConfig{
		{KVHeads: 2, HeadDim: 128, PageSize: 64, Pages: 12},
		{KVHeads: 3, HeadDim: 64, PageSize: 128, Pages: 6},
		{KVHeads: 1, HeadDim: 80, PageSize: 64, Pages: 8},
	} {
		t.Run(fmt.Sprintf("h%d-d%d-p%d", c.KVHeads, c.HeadDim, c.PageSize), func(t *testing.T) {
			host, err := cpu.New(2).NewPagedKV(c)
			if err != nil {
				t.Fatal(err)
			}
			defer host.Close()
			gpu, err := testBackend(0).NewPagedKV(c)
			if err != nil {
				t.Fatal(err)
			}
			defer gpu.Close()
			// dev gets every append from device buffers (PagedAppend.KBuf).
			dev, err := testBackend(0).NewPagedKV(c)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			d, err := openDevice(0)
			if err != nil {
				t.Fatal(err)
			}
			fromDevice := func(a *backend.PagedAppend) error {
				kb, err1 := d.Alloc(4 * int64(len(a.K)))
				vb, err2 := d.Alloc(4 * int64(len(a.V)))
				if err := errors.Join(err1, err2); err != nil {
					return err
				}
				defer kb.Free()
				defer vb.Free()
				if err := errors.Join(kb.Write(bytesOf(a.K)), vb.Write(bytesOf(a.V))); err != nil {
					return err
				}
				da := *a
				da.K, da.V, da.KBuf, da.VBuf = nil, nil, kb, vb
				return dev.Append(&da)
			}
			mags := []float64{1, 1e-3, 30, 0, 2e3, 1e-6, 5e5, 0.7, -0.0}
			row := 0
			fill := func(x []float32) {
				for i := range x {
					if i%c.HeadDim == 0 {
						row++
					}
					m := mags[row%len(mags)]
					if m == 0 || math.Signbit(m) {
						x[i] = float32(m)
						continue
					}
					x[i] = float32(rng.NormFloat64() * m)
				}
			}
			put := func(a *backend.PagedAppend) {
				t.Helper()
				n := a.B * a.N * c.KVHeads * c.HeadDim
				a.K, a.V = make([]float32, n), make([]float32, n)
				fill(a.K)
				fill(a.V)
				if err := host.Append(a); err != nil {
					t.Fatal(err)
				}
				if err := gpu.Append(a); err != nil {
					t.Fatal(err)
				}
				if err := fromDevice(a); err != nil {
					t.Fatal(err)
				}
			}
			P := c.PageSize
			// Two entries into page 0 (slots 0-2 and 3-5): the second
			// batch entry's run must follow the first.
			put(&backend.PagedAppend{B: 2, N: 3, Layout: backend.BSHD, Page: []int32{0, 0, 0, 0, 0, 0}, Slot: []int32{0, 1, 2, 3, 4, 5}})
			// Two sequences in shuffled pages, filled in random chunks.
			perm := rng.Perm(c.Pages - 1)
			seqPages := [][]int{{perm[0] + 1, perm[1] + 1, perm[2] + 1}, {perm[3] + 1, perm[4] + 1}}
			for s, pages := range seqPages {
				for done := 0; done < len(pages)*P-rng.IntN(P); {
					n := min(len(pages)*P-done, 1+rng.IntN(P+P/2))
					a := &backend.PagedAppend{B: 1, N: n, Layout: backend.Layout(s % 2)}
					for tk := done; tk < done+n; tk++ {
						a.Page = append(a.Page, int32(pages[tk/P]))
						a.Slot = append(a.Slot, int32(tk%P))
					}
					put(a)
					done += n
				}
			}
			hr, gr := host.(backend.PagedReader), gpu.(backend.PagedReader)
			if err := diffPages(hr, gr, c); err != nil {
				t.Fatal(err)
			}
			if err := diffPages(hr, flipOne{gr}, c); err == nil {
				t.Fatal("diffPages missed a flipped code")
			}
			if err := diffPages(hr, dev.(backend.PagedReader), c); err != nil {
				t.Fatalf("appends from device buffers: %v", err)
			}
			// A non-finite value in device buffers: refused, nothing written
			// (the same append with finite values would change page 0).
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
				n := 2 * c.KVHeads * c.HeadDim
				a := &backend.PagedAppend{B: 1, N: 2, Page: []int32{0, 0}, Slot: []int32{0, 1}, K: make([]float32, n), V: make([]float32, n)}
				fill(a.K)
				fill(a.V)
				a.V[n-1] = bad
				if err := fromDevice(a); !errors.Is(err, backend.ErrInvalid) {
					t.Fatalf("append of %v from device buffers: %v, want ErrInvalid", bad, err)
				}
			}
			if err := diffPages(hr, dev.(backend.PagedReader), c); err != nil {
				t.Fatalf("after refused appends: %v", err)
			}
		})
	}
}

// TestPagedAgainstCPU: attention over one set of appends, in a cpu cache
// and a GPU cache (same codes: TestPagedAppendBitExact), agrees: both are
// within FP32Tolerance of exact attention on those codes, so within twice it
// of each other. Long, ragged sequences make the keys split across blocks
// (the merge runs); chunks of new queries and GQA groups make several row
// blocks a KV head. A failure names the (sequence, head, position) rows.
func TestPagedAgainstCPU(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xDEC))
	bes := pagedBackends(t)
	for _, c := range []pagedCPUCase{
		{hkv: 1, g: 1, sq: 1, d: 64, page: 64, lens: []int{200}, mask: backend.NoMask, layout: backend.BHSD},
		{hkv: 2, g: 2, sq: 7, d: 64, page: 64, lens: []int{200}, mask: backend.CausalLowerRight, layout: backend.BHSD},
		{hkv: 2, g: 2, sq: 7, d: 64, page: 64, lens: []int{200, 7, 65}, mask: backend.CausalLowerRight, layout: backend.BHSD, chunk: 37},
		{hkv: 1, g: 4, sq: 1, d: 64, page: 64, lens: []int{2000}, mask: backend.NoMask, layout: backend.BSHD},
		{hkv: 2, g: 4, sq: 1, d: 64, page: 64, lens: []int{2000, 300, 0}, mask: backend.CausalLowerRight, layout: backend.BSHD},
		{hkv: 2, g: 4, sq: 1, d: 128, page: 64, lens: []int{4000, 37, 3000, 1}, mask: backend.CausalLowerRight, layout: backend.BSHD},
		{hkv: 2, g: 8, sq: 3, d: 128, page: 128, lens: []int{4000, 37, 3000, 1}, mask: backend.CausalLowerRight, layout: backend.BHSD, chunk: 500},
		{hkv: 1, g: 2, sq: 5, d: 256, page: 64, lens: []int{700, 90}, mask: backend.CausalLowerRight, layout: backend.BSHD},
		// One item of many splits (79 and 63 on a 132-SM H200): the
		// warp-specialized kernel's merge runs several chunks of
		// SPLIT_LOADS splits (transposed units, then PagedWarp's).
		{hkv: 1, g: 4, sq: 1, d: 64, page: 64, lens: []int{20000}, mask: backend.NoMask, layout: backend.BSHD},
		{hkv: 1, g: 8, sq: 1, d: 128, page: 64, lens: []int{16000}, mask: backend.NoMask, layout: backend.BHSD},
	} {
		for _, be := range bes {
			t.Run(c.name(be), func(t *testing.T) { runPagedAgainstCPU(t, be, c, rng) })
		}
	}
}

// TestPagedConcurrent: many goroutines run attention on one GPU cache at
// once (allowed: PagedKV.Attention with Attention); each gets the result a
// lone call gets, bit for bit (the kernels are deterministic).
func TestPagedConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 0xC0C))
	c := backend.PagedConfig{KVHeads: 1, HeadDim: 64, PageSize: 64, Pages: 8}
	gpu, err := testBackend(0).NewPagedKV(c)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	n := 300
	a := &backend.PagedAppend{B: 1, N: n, K: make([]float32, n*64), V: make([]float32, n*64)}
	for i := range a.K {
		a.K[i], a.V[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for tk := range n {
		a.Page, a.Slot = append(a.Page, int32(7-tk/64)), append(a.Slot, int32(tk%64))
	}
	if err := gpu.Append(a); err != nil {
		t.Fatal(err)
	}
	problem := func(seed uint64) *backend.PagedProblem {
		r := rand.New(rand.NewPCG(seed, 1))
		p := &backend.PagedProblem{B: 1, Hq: 4, Hkv: 1, Sq: 1, D: 64, Scale: 0.125, PagesPerSeq: 5,
			SeqLens: []int32{int32(n)}, BlockTable: []int32{7, 6, 5, 4, 3}, Q: make([]float32, 4*64), Out: make([]float32, 4*64)}
		for i := range p.Q {
			p.Q[i] = float32(r.NormFloat64())
		}
		return p
	}
	const workers = 8
	want := make([][]float32, workers)
	for w := range workers {
		p := problem(uint64(w))
		if err := gpu.Attention(p); err != nil {
			t.Fatal(err)
		}
		want[w] = p.Out
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				p := problem(uint64(w))
				if err := gpu.Attention(p); err != nil {
					errs <- err
					return
				}
				for i := range p.Out {
					if math.Float32bits(p.Out[i]) != math.Float32bits(want[w][i]) {
						errs <- fmt.Errorf("worker %d element %d: %g, alone %g", w, i, p.Out[i], want[w][i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPagedUnsupported: head dims and page sizes the kernels lack are
// ErrUnsupported (the sdpa layer reports them), not a failure later.
func TestPagedUnsupported(t *testing.T) {
	for _, c := range []backend.PagedConfig{
		{KVHeads: 1, HeadDim: 72, PageSize: 64, Pages: 2},
		{KVHeads: 1, HeadDim: 64, PageSize: 16, Pages: 2},
	} {
		if _, err := testBackend(0).NewPagedKV(c); !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("%+v: %v, want ErrUnsupported", c, err)
		}
	}
}

// decodeShapes are the decode table's steps (docs/BENCHMARKS.md; D=128, one new token a
// sequence, every sequence Sk long).
var decodeShapes = []struct {
	name           string
	b, hq, hkv, sk int
}{
	{"B8-Hq32-Hkv8-Sk8192", 8, 32, 8, 8192},
	{"B1-Hq32-Hkv8-Sk32768", 1, 32, 8, 32768},
	{"B64-Hq32-Hkv8-Sk2048", 64, 32, 8, 2048},
}

// BenchmarkPagedDecode times one decode step (one new query token per
// sequence, attention only) over a full FP8 paged cache, per call in
// CUDA-graph replay, on decodeShapes; pages shuffled ("paged") or in
// order ("contiguous"), and shuffled with the cp.async kernel forced
// ("paged-cp.async": on Hopper, the kernel the warp-specialized one
// replaces, in the same run). Reports µs per call and the cache bytes read per
// second (K and V codes of every sequence once).
func BenchmarkPagedDecode(b *testing.B) {
	for _, s := range decodeShapes {
		for _, order := range []string{"paged", "contiguous", "paged-cp.async"} {
			b.Run(s.name+"/"+order, func(b *testing.B) {
				be := &kernelBackend{name: "cuda", pagedCpAsync: order == "paged-cp.async"}
				times, err := decodeTimesOn(be, s.b, s.hq, s.hkv, s.sk, 128, order != "contiguous", 0, 0, max(b.N, 50), nil)
				if err != nil {
					b.Fatal(err)
				}
				us := median(times)
				b.ReportMetric(us, "us/call")
				b.ReportMetric(float64(2*s.b*s.hkv*s.sk*128)/us/1e6, "TB/s")
			})
		}
	}
}

// BenchmarkPagedDecodeRagged times a decode step of 64 sequences of
// different lengths (64 to 4096 keys, 2,217 on average; fixed draws), Hq32
// Hkv8 D128, shuffled pages, per call in CUDA-graph replay: a batch of
// continuous batching, where units of unequal lengths meet the kernel's
// unit scheduling (kernels/paged.cu, UnitQueue).
func BenchmarkPagedDecodeRagged(b *testing.B) {
	const B, hq, hkv, sk = 64, 32, 8, 4096
	rng := rand.New(rand.NewPCG(7, 7))
	lens, keys := make([]int32, B), 0
	for s := range lens {
		lens[s] = int32(64 + rng.IntN(sk-63))
		keys += int(lens[s])
	}
	b.Run(fmt.Sprintf("B%d-Hq%d-Hkv%d-Sk%d-ragged/paged", B, hq, hkv, sk), func(b *testing.B) {
		times, err := decodeTimesOn(&kernelBackend{name: "cuda"}, B, hq, hkv, sk, 128, true, 0, 0, max(b.N, 50), lens)
		if err != nil {
			b.Fatal(err)
		}
		us := median(times)
		b.ReportMetric(us, "us/call")
		b.ReportMetric(float64(2*hkv*keys*128)/us/1e6, "TB/s")
	})
	b.Logf("mean length %d keys", keys/B)
}

// BenchmarkPagedDecodeSplits times the decode step of BenchmarkPagedDecode
// (shuffled pages) with the number of key splits and the blocks an SM holds
// forced: the measurements behind splitKeys's choice.
func BenchmarkPagedDecodeSplits(b *testing.B) {
	for _, s := range []struct {
		name           string
		b, hq, hkv, sk int
		splits         []int
	}{
		{"B8-Hq32-Hkv8-Sk8192", 8, 32, 8, 8192, []int{3, 4, 6}},
		{"B1-Hq32-Hkv8-Sk32768", 1, 32, 8, 32768, []int{24, 33, 49}},
		{"B64-Hq32-Hkv8-Sk2048", 64, 32, 8, 2048, []int{1, 2}},
	} {
		for _, n := range s.splits {
			for _, bps := range []int{3, 2} {
				b.Run(fmt.Sprintf("%s/splits=%d/blocks-per-SM=%d", s.name, n, bps), func(b *testing.B) {
					times, err := decodeTimes(s.b, s.hq, s.hkv, s.sk, 128, true, n, bps, max(b.N, 50))
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(median(times), "us/call")
				})
			}
		}
	}
}

// TestPagedPlanWS: the key splits of the warp-specialized kernel (one block
// an SM, units round robin) on an H200's 132 SMs for decodeShapes,
// and the kernel plan picks (the cp.async one for more than four units a
// block).
func TestPagedPlanWS(t *testing.T) {
	dev := &device{SMs: 132}
	for _, c := range []struct {
		items, maxTiles, splits, perSplit int
	}{
		{64, 256, 2, 128}, // B8 Hq32 Hkv8 Sk8192: 128 units, one a block
		{8, 1024, 16, 64}, // B1 Hq32 Hkv8 Sk32768: 128 units
		{512, 64, 1, 64},  // B64 Hq32 Hkv8 Sk2048: 3.9 units a block, no merge
		{1024, 64, 1, 64}, // B128: 7.8 units a block, the cp.async kernel
		{1, 2, 1, 2},      // a short sequence
		{8, 40, 5, 8},     // a split has a tile for every consumer warp
		{8, 10, 1, 10},    // two splits of 5 tiles would leave warps idle
	} {
		s := &pagedKV{dev: dev}
		s.wsCfg, _ = tiles.PagedWS(128)
		if splits, per := s.splitKeysWS(c.items, c.maxTiles); splits != c.splits || per != c.perSplit {
			t.Errorf("%d items of %d tiles: %d splits of %d tiles, want %d of %d", c.items, c.maxTiles, splits, per, c.splits, c.perSplit)
		}
		// Which kernel plan runs: one B·Hkv·row-block item a sequence of
		// c.maxTiles tiles, the warp-specialized kernel where it has one.
		s.tc, _ = tiles.Paged(128)
		s.perSM = 2
		p := &backend.PagedProblem{B: c.items, Hq: 4, Hkv: 1, Sq: 1, D: 128, PagesPerSeq: c.maxTiles}
		for range c.items {
			p.SeqLens = append(p.SeqLens, int32(32*c.maxTiles))
		}
		blocks, _, _ := s.plan(p)
		if want := c.items*c.splits <= 4*dev.SMs; s.useWS != want {
			t.Errorf("%d items of %d tiles: warp-specialized %v, want %v", c.items, c.maxTiles, s.useWS, want)
		}
		// Its ring: 16 of the 24 slots where each block has one unit.
		if want := map[bool]int32{true: 16, false: 24}[c.items*c.splits <= dev.SMs]; s.useWS && s.params.WSSlots != want {
			t.Errorf("%d items of %d tiles on %d blocks: %d ring slots, want %d", c.items, c.maxTiles, blocks, s.params.WSSlots, want)
		}
		// Units drawn at run time (the ticket, fp8attn_paged_wsq_d*) where
		// blocks have more than one.
		if want := s.useWS && c.items*c.splits > dev.SMs; s.wsDynamic != want {
			t.Errorf("%d items of %d tiles on %d blocks: units drawn at run time %v, want %v", c.items, c.maxTiles, blocks, s.wsDynamic, want)
		}
	}
	// Several units a block keep the whole ring, at every head dim.
	for _, d := range tiles.PagedWSHeadDims {
		c, _ := tiles.PagedWS(d)
		if got := wsSlots(c, 3*132, 132); got != c.Ring {
			t.Errorf("D=%d, three units a block: %d slots, want the ring's %d", d, got, c.Ring)
		}
		if got := wsSlots(c, 100, 132); got != 2*c.Consumers || got%c.Consumers != 0 || got > c.Ring {
			t.Errorf("D=%d, one unit a block: %d slots, want %d", d, got, 2*c.Consumers)
		}
	}
}

// TestPagedLayout: the host's reading of the cache layout (ReadPage) puts
// every (slot, dim) of a block at a distinct offset, and the key swizzle
// keeps chunks inside their row and, where the row length allows it, the
// eight rows of each ldmatrix in eight bank groups. (That the kernels
// write and read this layout is what TestPagedAppendBitExact and the
// conformance table show.)
func TestPagedLayout(t *testing.T) {
	for _, D := range tiles.PagedHeadDims {
		const P = 64
		seenK, seenV := make([]bool, P*D), make([]bool, P*D)
		for slot := range P {
			for d := range D {
				k, v := pagedKeyIndex(slot, d, D), pagedValueIndex(slot, d, D)
				if k/D != slot || seenK[k] || v/(32*D) != slot/32 || seenV[v] {
					t.Fatalf("D=%d: (slot %d, d %d) at K %d, V %d: outside its row or tile, or taken", D, slot, d, k, v)
				}
				seenK[k], seenV[v] = true, true
			}
		}
		if nc := D / 16; nc%8 == 0 || nc == 4 {
			for j := range 4 { // matrix j of an ldmatrix.x4: shared rows 8j..8j+7
				for c := range nc {
					banks := map[int]bool{}
					for r := 8 * j; r < 8*j+8; r++ {
						k := r&16 | r&1 | ((r>>3)&1)<<1 | ((r>>1)&3)<<2 // the key at shared row r
						banks[pagedKeyIndex(k, 16*c, D)/16%8] = true
					}
					if len(banks) != 8 {
						t.Errorf("D=%d: matrix %d chunk %d reads %d bank groups, want 8", D, j, c, len(banks))
					}
				}
			}
		}
	}
}

// BenchmarkPagedDecodeWSSplits times the decode step of BenchmarkPagedDecode
// with the warp-specialized kernel forced, at several key splits.
func BenchmarkPagedDecodeWSSplits(b *testing.B) {
	for _, s := range []struct {
		name           string
		b, hq, hkv, sk int
		splits         []int
	}{
		{"B8-Hq32-Hkv8-Sk8192", 8, 32, 8, 8192, []int{2, 4, 8}},
		{"B1-Hq32-Hkv8-Sk32768", 1, 32, 8, 32768, []int{16, 32, 64}},
		{"B64-Hq32-Hkv8-Sk2048", 64, 32, 8, 2048, []int{1, 2}},
	} {
		for _, n := range s.splits {
			b.Run(fmt.Sprintf("%s/splits=%d", s.name, n), func(b *testing.B) {
				times, err := decodeTimesOn(&kernelBackend{name: "cuda"}, s.b, s.hq, s.hkv, s.sk, 128, true, -n, 0, max(b.N, 50), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(median(times), "us/call")
			})
		}
	}
}

// decodeTimes fills a GPU cache with b sequences of sk random tokens and
// times decode steps over it, with splits key splits and at most
// blocksPerSM blocks an SM (0: the backend's choice; splits < 0: the
// warp-specialized kernel forced with -splits splits).
func decodeTimes(b, hq, hkv, sk, d int, shuffled bool, splits, blocksPerSM, iters int) ([]float64, error) {
	return decodeTimesOn(&kernelBackend{name: "cuda"}, b, hq, hkv, sk, d, shuffled, splits, blocksPerSM, iters, nil)
}

// decodeTimesOn is decodeTimes on backend be; with lens, sequence s of the
// step is lens[s] <= sk keys long (the cache holds sk of each).
func decodeTimesOn(be *kernelBackend, b, hq, hkv, sk, d int, shuffled bool, splits, blocksPerSM, iters int, lens []int32) ([]float64, error) {
	const P = 64
	pages := b * sk / P
	kv, err := be.NewPagedKV(backend.PagedConfig{KVHeads: hkv, HeadDim: d, PageSize: P, Pages: pages})
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	if splits < 0 { // the warp-specialized kernel with -splits splits
		kv.(*pagedKV).wsSplits = -splits
	} else {
		kv.(*pagedKV).splits, kv.(*pagedKV).blocksPerSM = splits, blocksPerSM
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := rng.Perm(pages)
	if !shuffled {
		for i := range order {
			order[i] = i
		}
	}
	chunk := min(1024, sk) // tokens per append
	x := make([]float32, chunk*hkv*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for s := range b {
		for t0 := 0; t0 < sk; t0 += chunk {
			a := &backend.PagedAppend{B: 1, N: chunk, K: x, V: x}
			for t := t0; t < t0+chunk; t++ {
				a.Page, a.Slot = append(a.Page, int32(order[s*sk/P+t/P])), append(a.Slot, int32(t%P))
			}
			if err := kv.Append(a); err != nil {
				return nil, err
			}
		}
	}
	p := &backend.PagedProblem{B: b, Hq: hq, Hkv: hkv, Sq: 1, D: d, Scale: float32(1 / math.Sqrt(float64(d))),
		Mask: backend.CausalLowerRight, Q: make([]float32, b*hq*d), Out: make([]float32, b*hq*d), PagesPerSeq: sk / P,
		Variants: decodeVariants}
	for i := range p.Q {
		p.Q[i] = float32(rng.NormFloat64())
	}
	for s := range b {
		n := int32(sk)
		if lens != nil {
			n = lens[s]
		}
		p.SeqLens = append(p.SeqLens, n)
		for i := range sk / P {
			p.BlockTable = append(p.BlockTable, int32(order[s*sk/P+i]))
		}
	}
	return kv.(timing.PagedTimer).PagedTimes(p, iters)
}

// TestPagedPlan: the occupancy and key splits the decode kernel is launched
// with, on an H200's SM count and shared memory, for decodeShapes
// (the choices BenchmarkPagedDecodeSplits measured fastest) and the other
// head dims' occupancy.
func TestPagedPlan(t *testing.T) {
	dev := &device{SMs: 132, SharedPerSM: 233472}
	for _, c := range []struct {
		d, items, maxTiles      int
		perSM, splits, perSplit int
	}{
		{128, 64, 256, 2, 4, 64},  // B8 Hq32 Hkv8 Sk8192
		{128, 8, 1024, 2, 32, 32}, // B1 Hq32 Hkv8 Sk32768
		{128, 512, 64, 2, 1, 64},  // B64 Hq32 Hkv8 Sk2048
		{64, 8, 1024, 2, 32, 32},  // four warps a block: two blocks
		{256, 8, 1024, 3, 47, 22}, // two warps a block: 8 warps would be four blocks; three fit
		{128, 1, 2, 2, 1, 2},      // a short sequence: one block
	} {
		tc, err := tiles.Paged(c.d)
		if err != nil {
			t.Fatal(err)
		}
		s := &pagedKV{dev: dev, tc: tc}
		var smem int
		s.perSM, smem = pagedOccupancy(dev, tc, 0)
		if s.perSM != c.perSM || smem < tc.SharedBytes() || (s.perSM+1)*(smem+1024) <= dev.SharedPerSM ||
			s.perSM*(smem+1536) > dev.SharedPerSM {
			t.Errorf("D=%d: %d blocks an SM with %d bytes of shared memory each, want %d (tiles %d bytes)", c.d, s.perSM, smem, c.perSM, tc.SharedBytes())
		}
		if splits, per := s.splitKeys(c.items, c.maxTiles); splits != c.splits || per != c.perSplit {
			t.Errorf("D=%d, %d items of %d tiles: %d splits of %d tiles, want %d of %d", c.d, c.items, c.maxTiles, splits, per, c.splits, c.perSplit)
		}
	}
}

// TestWSTimeline is a diagnostic, not a check: with FP8ATTN_PROFILE=1 and
// FP8ATTN_PAGED_CUBIN naming a paged module built with -DFP8ATTN_PROFILE
// (kernels/profile.cuh; the events: kernels/paged.cu, WS_STAMP), it replays the decode
// step of BenchmarkPagedDecode (shuffled pages) in a graph and logs where
// the last call's time went: for each step a block records, the earliest,
// median and latest block, in µs from the first block's pdl_wait; and the
// splits' merges alone. Skipped otherwise.
func TestWSTimeline(t *testing.T) {
	profileSkip(t, "the paged cubin (FP8ATTN_PAGED_CUBIN)")
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	const slots = 24 // of kernel 0, row 0
	// The steps kernels/paged.cu records (WS_STAMP), in the
	// order they happen; slot 8 flags the merging blocks, 9 is the SM.
	steps := []struct {
		slot int
		name string
	}{
		{0, "entry"}, {1, "past pdl_wait"}, {10, "producer 0 started"}, {11, "unit's length, pages"},
		{12, "first tile's place"}, {2, "first copy issued"}, {15, "consumer 0 started"},
		{3, "first tile landed"}, {4, "last tiles done"}, {20, "st.finish done"}, {16, "merge_warps: all in"},
		{17, "merge_warps: stats in"}, {18, "merge_warps: rows weighed"}, {19, "merge_warps: written"}, {5, "merge_warps done"},
		{6, "split counter read"}, {13, "merge: LSEs loaded"}, {14, "merge: rows weighed"}, {7, "end"},
	}
	for _, s := range decodeShapes {
		clearProfile(t, d, d.pmod)
		times, err := decodeTimesOn(&kernelBackend{name: "cuda"}, s.b, s.hq, s.hkv, s.sk, 128, true, 0, 0, 50, nil)
		if err != nil {
			t.Fatal(err)
		}
		tab := readProfile(t, d, d.pmod)
		var rows [][]int32
		for b := range tab.Blocks {
			if r := profileRow(tab, 0, b, 0, slots); r[1] != 0 {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			t.Fatalf("%s: no block recorded a stamp (is the warp-specialized kernel running?)", s.name)
		}
		t0 := rows[0][1]
		for _, r := range rows {
			if r[1]-t0 < 0 {
				t0 = r[1]
			}
		}
		at := func(slot int, keep func([]int32) bool) string {
			var x []float64
			for _, r := range rows {
				if r[slot] != 0 && (keep == nil || keep(r)) {
					x = append(x, float64(r[slot]-t0)/1e3)
				}
			}
			if len(x) == 0 {
				return "-"
			}
			sort.Float64s(x)
			return fmt.Sprintf("%7.2f %7.2f %7.2f", x[0], x[len(x)/2], x[len(x)-1])
		}
		t.Logf("%s: %d blocks, %.2f µs a call (graph replay, median); µs from the first pdl_wait, earliest/median/latest block:", s.name, len(rows), median(times))
		for _, st := range steps {
			t.Logf("  %-22s %s", st.name, at(st.slot, nil))
		}
		merging := func(r []int32) bool { return r[8] == 1 }
		t.Logf("  blocks that merged the splits: end %s; from the counter read to the LSEs loaded %s, to the rows weighed %s, to the end %s",
			at(7, merging), spans(rows, 6, 13, merging), spans(rows, 6, 14, merging), spans(rows, 6, 7, merging))
	}
}

// spans returns the earliest, median and latest of slot b minus slot a in
// µs over the rows keep accepts.
func spans(rows [][]int32, a, b int, keep func([]int32) bool) string {
	var x []float64
	for _, r := range rows {
		if keep(r) {
			x = append(x, float64(r[b]-r[a])/1e3)
		}
	}
	if len(x) == 0 {
		return "-"
	}
	sort.Float64s(x)
	return fmt.Sprintf("%.2f %.2f %.2f", x[0], x[len(x)/2], x[len(x)-1])
}
