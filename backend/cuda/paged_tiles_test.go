//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPagedTilesMatchGather: the paged form of stage 9 (K and V read from
// the cache's pages in place) gives the gathered path's output bits, and
// its LSEs within the row sums' order (lseClose), where no code is
// re-encoded: every page holds one K and one V scale (each token's
// first value pins the amax, the others below it). Both paths run each
// call, unsplit, the outputs poisoned before each; one sequence (one past
// a chunk of the producer's tiles) and several of different lengths (each
// its own keys), both layouts, with and without an LSE, under a sliding
// window and sinks. The paged form must run.
func TestPagedTilesMatchGather(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A6E)
	if d.ComputeCapability != 90 {
		t.Skip("the paged form is the Hopper kernel's")
	}
	be.pagedPrefillRows = 1
	d.splitsForced = 1 // (both paths unsplit on the small grids)
	t.Cleanup(func() { d.splitsForced = 0 })
	for _, c := range []prefillCase{
		{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 1, n: 1300, mask: backend.CausalLowerRight, layout: backend.BHSD},
		// Past a chunk of the producer's tiles (hopper/paged.cuh's CHUNK).
		{hkv: 1, g: 2, sq: 256, d: 128, page: 64, b: 1, n: 20000, mask: backend.CausalLowerRight, layout: backend.BHSD},
		{hkv: 2, g: 4, sq: 128, d: 128, page: 64, b: 3, ns: []int{900, 4000, 130}, mask: backend.CausalLowerRight, layout: backend.BSHD},
		{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 2, ns: []int{1500, 1090}, mask: backend.CausalLowerRight, layout: backend.BSHD},
		{hkv: 4, g: 2, sq: 2048, d: 128, page: 64, b: 2, n: 2048, mask: backend.NoMask, layout: backend.BHSD},
		{hkv: 8, g: 4, sq: 1024, d: 128, page: 64, b: 1, n: 3000, mask: backend.CausalLowerRight, layout: backend.BHSD, window: 700, sinks: true},
	} {
		t.Run(c.name(), func(t *testing.T) {
			ns := c.lens()
			kv, table, per := equalScaleCache(t, be, rng, c.hkv, c.d, c.page, ns)
			defer kv.Close()
			s := kv.(*pagedKV)
			for _, lse := range []bool{true, false} {
				p := c.problem(rng, table, per)
				if !lse {
					p.LSE = nil
				}
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
// (filledCache: magnitudes 10^6 apart, the smaller page of a tile re-encoded) matches
// the float64 oracle on the tiles' own model (tileModel: each tile's two
// pages at the larger of their scales) within the Hopper kernel's
// tolerances (those of the gathered model, whose scales are at least the
// tiles'), its outputs and LSEs poisoned first: one sequence past a chunk
// of the producer's tiles (hopper/paged.cuh's CHUNK), several of different
// lengths, with a window and sinks. The paged form must run.
func TestPagedTilesMixedScales(t *testing.T) {
	d, be, rng := prefillTestDevice(t, 0x7A6F)
	if d.ComputeCapability != 90 {
		t.Skip("the paged form is the Hopper kernel's")
	}
	be.pagedPrefillRows, be.pagedInPlaceTiles = 1, true
	d.splitsForced = 1 // (small grids: the paged form runs no key split)
	t.Cleanup(func() { d.splitsForced = 0 })
	for _, c := range []prefillCase{
		{hkv: 1, g: 2, sq: 128, d: 128, page: 64, b: 1, n: 17000, mask: backend.CausalLowerRight, layout: backend.BHSD},
		{hkv: 2, g: 2, sq: 256, d: 128, page: 64, b: 3, ns: []int{700, 333, 2100}, mask: backend.CausalLowerRight, layout: backend.BSHD,
			window: 500, sinks: true},
		{hkv: 1, g: 4, sq: 384, d: 128, page: 64, b: 1, n: 1500, mask: backend.NoMask, layout: backend.BHSD},
	} {
		t.Run(c.name(), func(t *testing.T) {
			ns := c.lens()
			kv, table, per := filledCache(t, be, rng, c.hkv, c.d, c.page, ns)
			defer kv.Close()
			p := c.problem(rng, table, per)
			for i := range p.Out {
				p.Out[i] = float32(math.NaN())
			}
			for i := range p.LSE {
				p.LSE[i] = float32(math.NaN())
			}
			before := pagedTilesLaunches.Load()
			if err := kv.Attention(p); err != nil {
				t.Fatal(err)
			}
			if pagedTilesLaunches.Load() == before {
				t.Fatal("the paged form did not run")
			}
			for b, n := range ns {
				pb := sequenceCall(p, b, per)
				dense, err := denseModel(kv, pb, n)
				if err != nil {
					t.Fatal(err)
				}
				tm, err := tileModel(kv, pb, dense, n)
				if err != nil {
					t.Fatal(err)
				}
				want, wantLSE := oracle.Naive(tm)
				if st := sdpatest.Compare(pb.Out, want, tolerance(tiles.HopperStage)(dense)); st.Beyond > 0 {
					t.Fatalf("sequence %d of %d tokens: %d outputs beyond tolerance (max error %.3g)", b, n, st.Beyond, st.MaxErr)
				}
				if st := sdpatest.Compare(pb.LSE, wantLSE, lseTolerance(tiles.HopperStage)(dense)); st.Beyond > 0 {
					t.Fatalf("sequence %d: %d LSEs beyond tolerance (max error %.3g)", b, st.Beyond, st.MaxErr)
				}
			}
		})
	}
}

// tileModel is what the paged form computes for p (one sequence of n
// tokens; dense its gathered model, denseModel's) as a float32 problem:
// dense's queries, dequantized, and each key tile's two pages re-encoded
// at the larger of their scales (the gather's rounding, reencode) and
// dequantized at it.
func tileModel(kv backend.PagedKV, p *backend.PagedProblem, dense *backend.Problem, n int) (*backend.Problem, error) {
	D, P := p.D, kv.Config().PageSize
	rd := kv.(backend.PagedReader)
	tm := &backend.Problem{Shape: dense.Shape, Scale: dense.Scale, Mask: dense.Mask, Layout: dense.Layout, Precision: backend.FP32,
		Variants: dense.Variants, Q: make([]float32, len(dense.Q8)), K: make([]float32, len(dense.K8)), V: make([]float32, len(dense.V8)),
		Out: make([]float32, len(dense.Out)), LSE: make([]float32, len(dense.LSE))}
	for h := range p.Hq {
		for i := range p.Sq {
			at := p.Layout.Offset(0, h, i, p.Hq, p.Sq, D)
			for e := range D {
				tm.Q[at+e] = dense.Q8[at+e].Float32() * dense.QScale[h]
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
