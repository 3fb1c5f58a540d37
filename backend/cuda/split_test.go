//go:build cuda

package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
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

// TestSplitsBeforeFusing: a float32 call whose FP8 call the plan splits,
// saving more than Quantize's second pass costs (quantizeFirst), is not
// fused (AttentionQuantizing declines it: the caller quantizes first, then
// the split runs); one whose FP8 call runs whole, or saves less by the
// split, is. The shapes are far from those bounds on any Hopper GPU of
// 100 SMs or more.
func TestSplitsBeforeFusing(t *testing.T) {
	d := hopperDevice(t)
	if d.SMs < 100 {
		t.Skipf("%d SMs: the shapes are an H100's or H200's", d.SMs)
	}
	b := &kernelBackend{name: "cuda/sm90", stage: tiles.HopperStage}
	for _, c := range []struct {
		s     backend.Shape
		m     backend.Mask
		split bool
	}{
		{backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 128, Sk: 8320, D: 128}, backend.CausalLowerRight, true},
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 512, Sk: 16384, D: 128}, backend.NoMask, true},
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 200, Sk: 3000, D: 64}, backend.NoMask, true},
		{backend.Shape{B: 4, Hq: 32, Hkv: 8, Sq: 1024, Sk: 1024, D: 128}, backend.CausalLowerRight, false},
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 1024, Sk: 1024, D: 64}, backend.NoMask, false},
		// Split in two parts on 128 SMs or more, saving less than the
		// second pass costs.
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 1024, Sk: 4096, D: 128}, backend.NoMask, false},
	} {
		p := &backend.Problem{Shape: c.s, Scale: 0.1, Mask: c.m, Layout: backend.BHSD, Precision: backend.FP8E4M3}
		if !d.fusable(p) {
			t.Fatalf("%+v: quant_pack9 does not take it", c.s)
		}
		if got := d.splitsBeforeFusing(p); got != c.split {
			t.Fatalf("%+v %v: splitsBeforeFusing %v, want %v", c.s, c.m, got, c.split)
		}
		nq, nkv := c.s.B*c.s.Hq*c.s.Sq*c.s.D, c.s.B*c.s.Hkv*c.s.Sk*c.s.D
		bufs, free := floatBuffers(t, d, make([]float32, nq), make([]float32, nkv), make([]float32, nq))
		err := b.AttentionQuantizing(p, bufs[2], nil, bufs[0], bufs[1], bufs[1])
		free()
		if c.split != errors.Is(err, backend.ErrUnsupported) || !c.split && err != nil {
			t.Fatalf("%+v %v: AttentionQuantizing: %v (split %v)", c.s, c.m, err, c.split)
		}
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
		for i := range p.Out {
			p.Out[i] = float32(math.NaN())
		}
		for i := range p.LSE {
			p.LSE[i] = float32(math.NaN())
		}
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
