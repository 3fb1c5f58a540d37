//go:build cuda

package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPagedTilesMatchGather: the paged form of stage 9 (K and V read from
// the cache's pages in place, the queries encoded a scale a row) gives the
// gathered path's output bits, and its LSEs within the row sums' order
// (lseClose), where no code is re-encoded and no row's scale differs from
// its head's: every page holds one K and one V scale, and every query row
// one amax (each token's and row's first value pins it, the others below
// it). Both paths run each call, unsplit, the outputs poisoned before each;
// one sequence (one past a chunk of the producer's tiles) and several of
// different lengths (each its own keys), both layouts, with and without an
// LSE, under a sliding window and sinks, and a negative scale (the codes
// negated). The paged form must run.
func TestPagedTilesMatchGather(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A6E)
	if d.ComputeCapability != 90 {
		t.Skip("the paged form is the Hopper kernel's")
	}
	be.pagedPrefillRows = 1
	d.splitsForced = 1 // (both paths unsplit on the small grids)
	t.Cleanup(func() { d.splitsForced = 0 })
	for _, tc := range []struct {
		prefillCase
		negative bool // the call's scale
	}{
		{prefillCase: prefillCase{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 1, n: 1300, mask: backend.CausalLowerRight, layout: backend.BHSD}},
		// Past a chunk of the producer's tiles (hopper/paged.cuh's CHUNK).
		{prefillCase: prefillCase{hkv: 1, g: 2, sq: 256, d: 128, page: 64, b: 1, n: 20000, mask: backend.CausalLowerRight, layout: backend.BHSD}},
		{prefillCase: prefillCase{hkv: 2, g: 4, sq: 128, d: 128, page: 64, b: 3, ns: []int{900, 4000, 130}, mask: backend.CausalLowerRight,
			layout: backend.BSHD}, negative: true},
		{prefillCase: prefillCase{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 2, ns: []int{1500, 1090}, mask: backend.CausalLowerRight,
			layout: backend.BSHD}},
		{prefillCase: prefillCase{hkv: 4, g: 2, sq: 2048, d: 128, page: 64, b: 2, n: 2048, mask: backend.NoMask, layout: backend.BHSD}},
		{prefillCase: prefillCase{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 1, n: 3000, mask: backend.CausalLowerRight, layout: backend.BHSD,
			window: 700, sinks: true}},
	} {
		c := tc.prefillCase
		t.Run(fmt.Sprintf("%s-neg%v", c.name(), tc.negative), func(t *testing.T) {
			ns := c.lens()
			kv, table, per := equalScaleCache(t, be, rng, c.hkv, c.d, c.page, ns)
			defer kv.Close()
			s := kv.(*pagedKV)
			for _, lse := range []bool{true, false} {
				p := c.problem(rng, table, per)
				if !lse {
					p.LSE = nil
				}
				if tc.negative {
					p.Scale = -p.Scale
				}
				equalRowAmax(p.Q, c.d)
				if s.prefillStage(p) == 0 {
					t.Fatal("the call does not run on the prefill kernels")
				}
				s.inPlaceTiles = false
				before := pagedTilesLaunches.Load()
				if err := kv.Attention(p); err != nil {
					t.Fatal(err)
				}
				if pagedTilesLaunches.Load() != before {
					t.Fatal("the gathered call ran the paged form (FP8ATTN_PAGED_TILES=1?)")
				}
				want, wantLSE := slices.Clone(p.Out), slices.Clone(p.LSE)
				s.inPlaceTiles = true
				before = pagedTilesLaunches.Load()
				if err := kv.Attention(p); err != nil {
					t.Fatal(err)
				}
				if pagedTilesLaunches.Load() == before {
					t.Fatal("the paged form did not run")
				}
				sameBits(t, "out", p.Out, want)
				lseClose(t, p.LSE, wantLSE, slices.Max(ns))
			}
		})
	}
}

// lseClose fails t where an LSE of got differs from want's by more than
// two float32 sums of keys positive terms may ((keys-1)·2^-24 of the sum
// each, the row sums' order being another: the paged form's scores come
// out in key_row's order within a tile), plus the rounding of each LSE;
// any NaN, or an infinity not matched, fails.
func lseClose(t *testing.T, got, want []float32, keys int) {
	t.Helper()
	for i, w := range want {
		g := got[i]
		if g == w {
			continue
		}
		d, tol := math.Abs(float64(g)-float64(w)), 2*float64(keys)*0x1p-24+0x1p-23*math.Abs(float64(w))
		if !(d <= tol) {
			t.Errorf("lse[%d] = %v, want %v (within %.3g)", i, g, w, tol)
			return
		}
	}
}

// equalRowAmax gives every row of d values of q one amax, 3.5, its first
// value, the others clamped to ±3: a row's scale is then its head's.
func equalRowAmax(q []float32, d int) {
	for i := range q {
		q[i] = max(-3, min(3, q[i]))
		if i%d == 0 {
			q[i] = 3.5
		}
	}
}

// equalScaleCache is filledCache with every page of one K and one V scale:
// each token's values N(0,1) clamped to ±3, its first 3.5.
func equalScaleCache(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int) (kv backend.PagedKV, table []int32, per int) {
	t.Helper()
	return cacheOf(t, be, rng, hkv, d, page, ns, func(i, _, _ int) float32 {
		x := float32(max(-3, min(3, rng.NormFloat64())))
		if i == 0 {
			x = 3.5
		}
		return x
	})
}

// TestPagedTilesMixedScales: the paged form over pages of different scales
// (filledCache: magnitudes 10^6 apart, the smaller page of a tile re-encoded)
// and query rows of different magnitudes (rowsApart: 2^-12 to 1) matches
// the float64 oracle on the tiles' own model (tileModel: each query row at
// its own scale, each tile's two pages at the larger of their scales)
// within the Hopper kernel's tolerances (those of the gathered model, whose
// scales are at least the tiles' and the rows'), its outputs and LSEs
// poisoned first: one sequence past a chunk of the producer's tiles
// (hopper/paged.cuh's CHUNK), several of different lengths, with a window
// and sinks, rows past the queries, values of one sign (biasedCache), and
// tiles of different scales without outliers (steppedCache), where the
// tolerance resolves a tile's V units. Each sequence's outputs are held to
// the worst-case tier and to the RMS one. The paged form must run.
func TestPagedTilesMixedScales(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A6F)
	if d.ComputeCapability != 90 {
		t.Skip("the paged form is the Hopper kernel's")
	}
	be.pagedPrefillRows, be.pagedInPlaceTiles = 1, true
	d.splitsForced = 1 // (small grids: the paged form runs no key split)
	t.Cleanup(func() { d.splitsForced = 0 })
	for _, tc := range []struct {
		prefillCase
		values string // the cache's values: "" filledCache's, "biased" biasedCache's, "stepped" steppedCache's
	}{
		{prefillCase: prefillCase{hkv: 1, g: 2, sq: 128, d: 128, page: 64, b: 1, n: 17000, mask: backend.CausalLowerRight, layout: backend.BHSD}},
		{prefillCase: prefillCase{hkv: 2, g: 2, sq: 256, d: 128, page: 64, b: 3, ns: []int{700, 333, 2100}, mask: backend.CausalLowerRight,
			layout: backend.BSHD, window: 500, sinks: true}},
		{prefillCase: prefillCase{hkv: 1, g: 4, sq: 384, d: 128, page: 64, b: 1, n: 1500, mask: backend.NoMask, layout: backend.BHSD}},
		// A last row block past the queries: its rows are never loaded.
		{prefillCase: prefillCase{hkv: 2, g: 2, sq: 200, d: 128, page: 64, b: 1, n: 1500, mask: backend.CausalLowerRight, layout: backend.BHSD}},
		{prefillCase: prefillCase{hkv: 1, g: 2, sq: 256, d: 128, page: 64, b: 1, n: 3000, mask: backend.CausalLowerRight, layout: backend.BHSD},
			values: "biased"},
		{prefillCase: prefillCase{hkv: 2, g: 2, sq: 256, d: 128, page: 64, b: 2, ns: []int{1500, 900}, mask: backend.CausalLowerRight,
			layout: backend.BSHD}, values: "stepped"},
	} {
		c := tc.prefillCase
		t.Run(fmt.Sprintf("%s-%s", c.name(), cmp.Or(tc.values, "filled")), func(t *testing.T) {
			ns := c.lens()
			kv, table, per := cacheOfValues(tc.values)(t, be, rng, c.hkv, c.d, c.page, ns)
			defer kv.Close()
			p := c.problem(rng, table, per)
			rowsApart(rng, p.Q, c.d)
			poisonHost(p)
			before := pagedTilesLaunches.Load()
			if err := kv.Attention(p); err != nil {
				t.Fatal(err)
			}
			if pagedTilesLaunches.Load() == before {
				t.Fatal("the paged form did not run")
			}
			for b, n := range ns {
				pb := sequenceCall(p, b, per)
				checkTileOracle(t, kv, pb, n, pb.Out, pb.LSE, fmt.Sprintf("sequence %d of %d tokens", b, n))
			}
		})
	}
}

// biasedCache is filledCache's pages of three magnitudes with values of
// one sign mostly (mean 1.5 times the page's magnitude, standard deviation
// one): a P·V folded in another tile's V units then moves the output by
// about the units' ratio, where over values of mean 0 the error averages
// out below the tolerance.
func biasedCache(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int) (kv backend.PagedKV, table []int32, per int) {
	t.Helper()
	return cacheOf(t, be, rng, hkv, d, page, ns, func(_, tk, h int) float32 {
		return float32((1.5 + rng.NormFloat64()) * pageMagnitude(tk, h, page))
	})
}

// cacheFiller makes a paged cache of be holding sequences of ns[b]
// tokens (filledCache's signature).
type cacheFiller func(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int) (backend.PagedKV, []int32, int)

// cacheOfValues is the cacheFiller a test case names by its values:
// filledCache's (""), biasedCache's, plainCache's or steppedCache's.
func cacheOfValues(values string) cacheFiller {
	switch values {
	case "biased":
		return biasedCache
	case "plain":
		return plainCache
	case "stepped":
		return steppedCache
	}
	return filledCache
}

// plainCache is a paged cache of values of one magnitude, mean 1.5 and
// standard deviation 1 (one sign mostly): with no page of large values to
// set the tolerance, one key's weight (a window's edge, a sink) or a half
// of a tile's keys moves the output past it.
func plainCache(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int) (kv backend.PagedKV, table []int32, per int) {
	t.Helper()
	return cacheOf(t, be, rng, hkv, d, page, ns, func(_, _, _ int) float32 {
		return float32(1.5 + rng.NormFloat64())
	})
}

// steppedCache is plainCache's values at one magnitude a key tile of two
// pages, 1, 1/8 and 4 in turn (by tile and KV head), without outliers:
// successive tiles of different V scales, whose outputs the tolerance
// (scaled by the largest value) still resolves, so that O kept in one
// tile's V units while another's are folded in fails.
func steppedCache(t *testing.T, be *kernelBackend, rng *rand.Rand, hkv, d, page int, ns []int) (kv backend.PagedKV, table []int32, per int) {
	t.Helper()
	return cacheOf(t, be, rng, hkv, d, page, ns, func(_, tk, h int) float32 {
		return float32((1.5 + rng.NormFloat64()) * [3]float64{1, 0.125, 4}[(tk/(2*page)+h)%3])
	})
}

// rowsApart scales each row of d values of q by its own power of two,
// 2^-12 to 1: at its head's scale a row 2^-12 below the largest would
// keep few bits (E4M3's normals span 2^-6 to 448), at its own all; and
// no score grows past the problem's bound.
func rowsApart(rng *rand.Rand, q []float32, d int) {
	for r := 0; r < len(q); r += d {
		f := float32(math.Ldexp(1, -rng.IntN(13)))
		for i := range d {
			q[r+i] *= f
		}
	}
}

// checkTileOracle holds out and lse (nil: none to check), what the paged
// or packed form computed for p (one sequence of n tokens, named what in
// failures), to the float64 oracle on the paged form's model (tileModel)
// within the Hopper kernel's tolerances of the gathered model (denseModel):
// the outputs to the worst-case tier and to the RMS one, the LSEs to
// theirs.
func checkTileOracle(t *testing.T, kv backend.PagedKV, p *backend.PagedProblem, n int, out, lse []float32, what string) {
	t.Helper()
	dense, err := denseModel(kv, p, n)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := tileModel(kv, p, dense, n)
	if err != nil {
		t.Fatal(err)
	}
	want, wantLSE := oracle.Naive(tm)
	st := sdpatest.Compare(out, want, tolerance(tiles.HopperStage)(dense))
	if st.Beyond > 0 {
		t.Fatalf("%s: %d outputs beyond tolerance (max error %.3g)", what, st.Beyond, st.MaxErr)
	}
	if err := rmsTolerance(tiles.HopperStage)(dense).Check(st); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if lse == nil {
		return
	}
	if st := sdpatest.Compare(lse, wantLSE, lseTolerance(tiles.HopperStage)(dense)); st.Beyond > 0 {
		t.Fatalf("%s: %d LSEs beyond tolerance (max error %.3g)", what, st.Beyond, st.MaxErr)
	}
}

// tileModel is what the paged form computes for p (one sequence of n
// tokens; dense its gathered model, denseModel's) as a float32 problem:
// p's queries encoded a scale a row (as the kernel's quantize_rows, as
// fp8.QuantizeE4M3Into with groups of D) and dequantized, and each key
// tile's two pages re-encoded at the larger of their scales (the gather's
// rounding, reencode) and dequantized at it.
func tileModel(kv backend.PagedKV, p *backend.PagedProblem, dense *backend.Problem, n int) (*backend.Problem, error) {
	D, P := p.D, kv.Config().PageSize
	rd := kv.(backend.PagedReader)
	tm := &backend.Problem{Shape: dense.Shape, Scale: dense.Scale, Mask: dense.Mask, Layout: dense.Layout, Precision: backend.FP32,
		Variants: dense.Variants, Q: make([]float32, len(dense.Q8)), K: make([]float32, len(dense.K8)), V: make([]float32, len(dense.V8)),
		Out: make([]float32, len(dense.Out)), LSE: make([]float32, len(dense.LSE))}
	row, codes, scale := make([]float32, D), make([]fp8.E4M3, D), make([]float32, 1)
	for h := range p.Hq {
		for i := range p.Sq {
			at := p.Layout.Offset(0, h, i, p.Hq, p.Sq, D)
			copy(row, p.Q[at:at+D])
			if err := fp8.QuantizeE4M3Into(codes, scale, row, D); err != nil {
				return nil, err
			}
			for e := range D {
				tm.Q[at+e] = codes[e].Float32() * scale[0]
			}
		}
	}
	pages := p.BlockTable[:(n+P-1)/P]
	k, v := make([]fp8.E4M3, P*D), make([]fp8.E4M3, P*D)
	_, hs, rs := p.Layout.Strides(p.Hkv, n, D)
	for h := range p.Hkv {
		for t0 := 0; t0 < len(pages); t0 += 2 {
			var ks, vs [2]float32
			for i := t0; i < min(t0+2, len(pages)); i++ {
				var err error
				if ks[i-t0], vs[i-t0], err = rd.ReadPage(int(pages[i]), h, k, v); err != nil {
					return nil, err
				}
			}
			sk, sv := max(ks[0], ks[1]), max(vs[0], vs[1])
			for i := t0; i < min(t0+2, len(pages)); i++ {
				if _, _, err := rd.ReadPage(int(pages[i]), h, k, v); err != nil {
					return nil, err
				}
				for j := range min(P, n-i*P) {
					at := h*hs + (i*P+j)*rs
					for e := range D {
						if sk > 0 {
							tm.K[at+e] = reencode(k[j*D+e], ks[i-t0]/sk).Float32() * sk
						}
						if sv > 0 {
							tm.V[at+e] = reencode(v[j*D+e], vs[i-t0]/sv).Float32() * sv
						}
					}
				}
			}
		}
	}
	return tm, tm.Validate()
}

// TestPagedTilesFlagFactor: a call whose score factor passes the limit
// (backend.MaxScoreFactor) for one query head is refused naming that head,
// on the gathered path (stage 9's per-head check of its score factor) and
// on the paged form (each row's factor with the largest K scale of its
// tiles, after its loop), whether the scale is positive or negative. Keys and
// values about 10^25, head 5's queries about 10^12: its factor is near
// 10^32 against a limit near 10^31 at D 128; the other heads' near 10^20.
func TestPagedTilesFlagFactor(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A70)
	if d.ComputeCapability != 90 {
		t.Skip("the paged form is the Hopper kernel's")
	}
	be.pagedPrefillRows = 1
	d.splitsForced = 1
	t.Cleanup(func() { d.splitsForced = 0 })
	c := prefillCase{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 1, n: 1300, mask: backend.CausalLowerRight, layout: backend.BHSD}
	kv, table, per := cacheOf(t, be, rng, c.hkv, c.d, c.page, c.lens(), func(int, int, int) float32 {
		return float32(rng.NormFloat64() * 1e25)
	})
	defer kv.Close()
	s := kv.(*pagedKV)
	for _, negative := range []bool{false, true} {
		p := c.problem(rng, table, per)
		if negative {
			p.Scale = -p.Scale
		}
		_, hs, _ := p.Layout.Strides(p.Hq, p.Sq, p.D)
		for i := range hs {
			p.Q[5*hs+i] *= 1e12
		}
		for _, inPlace := range []bool{false, true} {
			s.inPlaceTiles = inPlace
			before := pagedTilesLaunches.Load()
			err := kv.Attention(p)
			if ran := pagedTilesLaunches.Load() != before; ran != inPlace {
				t.Fatalf("in place %v: the paged form ran: %v", inPlace, ran)
			}
			if !errors.Is(err, backend.ErrInvalid) || !strings.Contains(err.Error(), "head (0, 5)") {
				t.Errorf("negative scale %v, in place %v: %v, want ErrInvalid naming head (0, 5)", negative, inPlace, err)
			}
		}
	}
}
