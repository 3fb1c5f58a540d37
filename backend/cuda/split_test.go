//go:build cuda

package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestKeySplit: the tiled tensor form's key split (split.go), forced to 2,
// 3 and 9 parts (parts past a block's tiles, and parts below every row's
// window, see no key), matches the float64 oracle on the same E4M3 inputs
// within the Hopper kernel's tolerances (output and LSE, poisoned
// outputs), as the unsplit launch does, and with a relative L2 error
// within 1.5 times the unsplit launch's (the tiers are worst-case bounds,
// looser than a sink counted twice): GQA, both layouts, masks of both
// alignments and none, rows that see no key, a window, sinks, every
// kernel head dim and one on zero columns; and the plan splits a chunk
// of 128 queries of 32 heads after 4096 keys on its own. The kernel mutants
// s9t-split-part-tiles and s9t-merge-sink-per-part fail it.
func TestKeySplit(t *testing.T) {
	const splitErrRatio = 1.5
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	if d.hopperErr != nil {
		t.Skip(d.hopperErr)
	}
	t.Cleanup(func() { d.splitsForced = 0 })
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 31))
	// Sinks near the rows' log-sum-exps (about 6-7 for these rows), so
	// that the sink's weight is a good part of each denominator.
	sinks := func(n int) []float32 { return normalSinks(rng, n, 6, 1) }
	for _, c := range []struct {
		s       backend.Shape
		m       backend.Mask
		l       backend.Layout
		scale   float32
		v       backend.Variants
		planned bool // the plan splits it (on an H200's 132 SMs)
	}{
		{backend.Shape{B: 1, Hq: 8, Hkv: 2, Sq: 100, Sk: 1500, D: 128}, backend.CausalLowerRight, backend.BHSD, 0.09, backend.Variants{}, false},
		{backend.Shape{B: 2, Hq: 4, Hkv: 4, Sq: 300, Sk: 900, D: 64}, backend.CausalUpperLeft, backend.BSHD, -0.125, backend.Variants{}, false},
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 200, Sk: 1200, D: 64}, backend.CausalLowerRight, backend.BHSD, 0.125,
			backend.Variants{SlidingWindow: 300, Sinks: sinks(4)}, false},
		{backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 70, Sk: 1000, D: 256}, backend.NoMask, backend.BHSD, 0.0625, backend.Variants{Sinks: sinks(2)}, false},
		{backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 129, Sk: 777, D: 80}, backend.CausalLowerRight, backend.BSHD, 0.1, backend.Variants{}, false},
		// Rows that see no key (lower-right causal, more queries than
		// keys): zeros and -Inf from every part.
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 500, Sk: 400, D: 64}, backend.CausalLowerRight, backend.BHSD, 0.125, backend.Variants{}, false},
		{backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 100, Sk: 1100, D: 192}, backend.NoMask, backend.BSHD, 0.07, backend.Variants{}, false},
		{backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 128, Sk: 4096, D: 128}, backend.CausalLowerRight, backend.BHSD, 0.088, backend.Variants{}, true},
	} {
		in := sdpatest.RandomInputs(rng, c.s, 1)
		for i := range in.V { // values of mean 1: a sink's weight moves every output by its share
			in.V[i]++
		}
		ref, _, _ := sdpatest.NewProblemLayout(c.s, in, c.scale, c.m, backend.FP8E4M3, c.l)
		ref.Variants = c.v
		want, wantLSE := oracle.Naive(ref)
		tol, ltol := tolerance(tiles.HopperStage)(ref), lseTolerance(tiles.HopperStage)(ref)
		bufs, free := deviceInputs(t, d, c.s, c.l, in)
		shape := &backend.Problem{Shape: c.s, Scale: c.scale, Mask: c.m, Layout: c.l, LSE: []float32{}, Variants: c.v}
		r, err := d.NewResident(shape, bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5])
		if err != nil {
			t.Fatal(err)
		}
		forced := []int{1, 2, 3, 9}
		if c.planned {
			forced = append(forced, 0)
		}
		// The tiers bound the worst case, loosely; a part's rows are the
		// unsplit rows' arithmetic over fewer keys, so the split's error
		// against the oracle, as a relative L2 norm, stays that of the
		// unsplit launch (parts 1, first): within splitErrRatio of it.
		var whole float64
		for _, parts := range forced {
			d.splitsForced = parts
			out, lse := make([]float32, len(want)), make([]float32, len(wantLSE))
			if err := errors.Join(r.Poison(), r.Run(tiles.HopperStage), r.Download(out, lse)); err != nil {
				t.Fatal(err)
			}
			if r.tensors == nil || r.tensorsRefused {
				t.Fatalf("%+v %v: the device inputs did not run the tensor form", c.s, c.l)
			}
			got := int(r.tensors.P.Splits)
			switch {
			case parts > 1 && got != parts:
				t.Fatalf("%+v: forced to %d parts, the launch had %d", c.s, parts, got)
			case parts == 1 && got != 0:
				t.Fatalf("%+v: one part, the launch was split in %d", c.s, got)
			case parts == 0 && got < 2:
				t.Fatalf("%+v: the plan did not split it (%d)", c.s, got)
			}
			if st := sdpatest.Compare(out, want, tol); st.Beyond > 0 {
				t.Fatalf("%+v %v %v, %d parts: %d outputs beyond tolerance, first %d: %g, want %g (max err %.3g)",
					c.s, c.m, c.v.SlidingWindow, got, st.Beyond, st.FirstBad, out[st.FirstBad], want[st.FirstBad], st.MaxErr)
			}
			rel := sdpatest.Compare(out, want, sdpatest.Tolerance{Atol: math.Inf(1)}).RelL2
			if parts == 1 {
				whole = rel
			} else if !(rel <= splitErrRatio*whole) {
				t.Fatalf("%+v %v, %d parts: relative L2 error %.4g against the oracle, the unsplit launch's %.4g", c.s, c.m, got, rel, whole)
			}
			if st := sdpatest.Compare(lse, wantLSE, ltol); st.Beyond > 0 {
				t.Fatalf("%+v %v, %d parts: %d LSEs beyond tolerance, first %d: %g, want %g",
					c.s, c.m, got, st.Beyond, st.FirstBad, lse[st.FirstBad], wantLSE[st.FirstBad])
			}
		}
		if err := r.Free(); err != nil {
			t.Fatal(err)
		}
		free()
	}
}

// TestFusedKeySplit: a float32 call the fused form takes (quant_pack9,
// then the fused attention) divides its blocks' keys as the FP8 call does
// (fp8attn_stage9fs over the images, then fp8attn_merge9): forced to 2 and
// 3 parts, and as planned, its output and LSE are bit for bit Quantize
// then AttentionOn in the same parts, and not the unsplit call's bits (the
// split ran). GQA, both layouts, masks of both alignments and none, a
// window and sinks, D 64, 128 and 256; outputs poisoned before each call.
// The Go mutant fusedunsplit fails it.
func TestFusedKeySplit(t *testing.T) {
	d := hopperDevice(t)
	t.Cleanup(func() { d.splitsForced = 0 })
	b := &kernelBackend{name: "cuda/sm90", stage: tiles.HopperStage}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 32))
	for _, c := range []struct {
		s       backend.Shape
		m       backend.Mask
		l       backend.Layout
		scale   float32
		v       backend.Variants
		planned bool // the plan splits it (on an H200's 132 SMs)
	}{
		{backend.Shape{B: 1, Hq: 8, Hkv: 2, Sq: 100, Sk: 1500, D: 128}, backend.CausalLowerRight, backend.BHSD, 0.1, backend.Variants{}, false},
		{backend.Shape{B: 2, Hq: 4, Hkv: 4, Sq: 300, Sk: 900, D: 64}, backend.CausalUpperLeft, backend.BSHD, -0.125, backend.Variants{}, false},
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 200, Sk: 1200, D: 64}, backend.CausalLowerRight, backend.BHSD, 0.125,
			backend.Variants{SlidingWindow: 300, Sinks: normalSinks(rng, 4, 6, 1)}, false},
		{backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 70, Sk: 1000, D: 256}, backend.NoMask, backend.BSHD, 0.0625, backend.Variants{Sinks: normalSinks(rng, 2, 6, 1)}, false},
		{backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 129, Sk: 777, D: 96}, backend.CausalLowerRight, backend.BSHD, 0.1, backend.Variants{}, false},
		// Rows 0 .. 99 see no key: their parts are empty.
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 500, Sk: 400, D: 64}, backend.CausalLowerRight, backend.BHSD, 0.125, backend.Variants{}, false},
		{backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 100, Sk: 1100, D: 192}, backend.NoMask, backend.BSHD, 0.07, backend.Variants{}, false},
		{backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 128, Sk: 4096, D: 128}, backend.CausalLowerRight, backend.BHSD, 0.088, backend.Variants{}, true},
	} {
		s := c.s
		p := &backend.Problem{Shape: s, Scale: c.scale, Mask: c.m, Layout: c.l, Variants: c.v, LSE: []float32{}}
		if !d.fusable(p) {
			t.Fatalf("%+v: quant_pack9 does not take it", s)
		}
		in := sdpatest.RandomInputs(rng, s, 1)
		nq, nl := s.B*s.Hq*s.Sq*s.D, s.B*s.Hq*s.Sq
		bufs, free := floatBuffers(t, d, in.Q, in.K, in.V)
		var jobs []backend.QuantizeJob
		var quantized [6]backend.Buffer
		for j, src := range bufs {
			h, n := s.Hkv, s.Sk
			if j == 0 {
				h, n = s.Hq, s.Sq
			}
			codes, scales := mustAlloc(t, d, s.B*h*n*s.D), mustAlloc(t, d, 4*s.B*h)
			quantized[j], quantized[3+j] = codes, scales
			jobs = append(jobs, backend.QuantizeJob{Codes: codes, Scales: scales, Src: src, B: s.B, H: h, S: n, D: s.D, Layout: c.l})
		}
		out, lse := mustAlloc(t, d, 4*nq), mustAlloc(t, d, 4*nl)
		// run poisons out and lse, calls call, and reads them back.
		run := func(call func() error) [2][]float32 {
			t.Helper()
			pois := make([]float32, nq)
			for i := range pois {
				pois[i] = math.Float32frombits(poison.Bits)
			}
			if err := errors.Join(out.Write(bytesOf(pois)), lse.Write(bytesOf(pois[:nl]))); err != nil {
				t.Fatal(err)
			}
			if err := call(); err != nil {
				t.Fatal(err)
			}
			got := [2][]float32{make([]float32, nq), make([]float32, nl)}
			if err := errors.Join(out.Read(bytesOf(got[0])), lse.Read(bytesOf(got[1]))); err != nil {
				t.Fatal(err)
			}
			return got
		}
		forced := []int{1, 2, 3, 9}
		if c.planned {
			forced = append(forced, 0)
		}
		var unsplit [2][]float32
		for _, parts := range forced {
			d.splitsForced = parts
			want := run(func() error { return errors.Join(b.Quantize(jobs...), b.AttentionOn(p, out, lse, quantized)) })
			got := run(func() error { return b.AttentionQuantizing(p, out, lse, bufs[0], bufs[1], bufs[2]) })
			for j, what := range []string{"output", "LSE"} {
				for e, x := range want[j] {
					if y := got[j][e]; math.Float32bits(x) != math.Float32bits(y) || math.Float32bits(y) == poison.Bits {
						t.Fatalf("%+v %v, %d parts: %s %d is %g fused, %g from Quantize and AttentionOn", s, c.m, parts, what, e, y, x)
					}
				}
			}
			if parts == 1 {
				unsplit = got
			} else if slices.Equal(got[0], unsplit[0]) {
				t.Fatalf("%+v %v, %d parts: the unsplit call's bits: the split did not run", s, c.m, parts)
			}
		}
		for _, x := range append(quantized[:], out, lse) {
			x.Free()
		}
		free()
	}
}

// TestPagedPrefillKeySplit: the cache's FP8 prefill (the tensor form over
// the gathered cache) with the key split forced on, over sequences of
// different lengths (Params.seq_k bounds each batch entry's parts) with a
// window and sinks, matches the float64 oracle on each sequence's dense
// model (denseModel: the gathered codes and scales) within the Hopper
// kernel's tolerances, within 1.5 times the unsplit call's relative
// error, and differs from it in some bit (the split ran). Outputs are
// poisoned with NaN before each call.
func TestPagedPrefillKeySplit(t *testing.T) {
	const splitErrRatio = 1.5
	d, be, rng := prefillTestDevice(t, 0x5B17)
	if d.hopperErr != nil {
		t.Skip(d.hopperErr)
	}
	be.pagedPrefillRows = 1
	t.Cleanup(func() { d.splitsForced = 0 })
	c := prefillCase{hkv: 2, g: 4, sq: 64, d: 128, page: 64, b: 3, ns: []int{1700, 333, 2100}, mask: backend.CausalLowerRight,
		layout: backend.BHSD, window: 900, sinks: true}
	ns := c.lens()
	kv, table, per := filledCache(t, be, rng, c.hkv, c.d, c.page, ns)
	defer kv.Close()
	p := c.problem(rng, table, per)
	if st := kv.(*pagedKV).prefillStage(p); st != tiles.HopperStage {
		t.Fatalf("the call runs on stage %d, not the Hopper prefill kernel", st)
	}
	var whole []float64 // each sequence's unsplit relative error
	var unsplit []float32
	for _, parts := range []int{1, 2, 5} {
		d.splitsForced = parts
		poisonHost(p)
		if err := kv.Attention(p); err != nil {
			t.Fatal(err)
		}
		if parts == 1 {
			unsplit = append([]float32(nil), p.Out...)
		} else if slices.Equal(unsplit, p.Out) {
			t.Fatalf("%d parts: the outputs are the unsplit call's bits: the split did not run", parts)
		}
		for b, n := range ns {
			pb := sequenceCall(p, b, per)
			dense, err := denseModel(kv, pb, n)
			if err != nil {
				t.Fatal(err)
			}
			want, wantLSE := oracle.Naive(dense)
			if st := sdpatest.Compare(pb.Out, want, tolerance(tiles.HopperStage)(dense)); st.Beyond > 0 {
				t.Fatalf("%d parts, sequence %d of %d tokens: %d outputs beyond tolerance (max error %.3g)", parts, b, n, st.Beyond, st.MaxErr)
			}
			if st := sdpatest.Compare(pb.LSE, wantLSE, lseTolerance(tiles.HopperStage)(dense)); st.Beyond > 0 {
				t.Fatalf("%d parts, sequence %d: %d LSEs beyond tolerance", parts, b, st.Beyond)
			}
			rel := sdpatest.Compare(pb.Out, want, sdpatest.Tolerance{Atol: math.Inf(1)}).RelL2
			if parts == 1 {
				whole = append(whole, rel)
			} else if !(rel <= splitErrRatio*whole[b]) {
				t.Fatalf("%d parts, sequence %d: relative L2 error %.4g against the oracle, the unsplit call's %.4g", parts, b, rel, whole[b])
			}
		}
	}
}
