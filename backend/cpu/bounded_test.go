package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestScoresSoftmaxBounded4 holds every bounded step
// (kernelSet.scoresSoftmaxBounded4) to the set's own scores4 (its dot
// products, scale 1) followed by softmax4BoundedGo: random key bounds
// (whole panels, single keys, empty rows with a finite maximum), softcaps
// or none, NaN and ±Inf scores inside and outside the bounds, running
// maxima finite, -Inf or NaN. Keys outside a row's bounds must get weight
// 0 exactly; and with a softcap and no old maximum, the weights must be
// the unfused step's (scores4, softcapRow, rowMax and expSum on the row's
// keys) bit for bit.
func TestScoresSoftmaxBounded4(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{1, 8, 16, 64, 96, 128, 256}
	caps := []float32{0.5, 5, 30, 50}
	sets := 0
	for _, ks := range kernelSets {
		if ks.scoresSoftmaxBounded4 == nil {
			continue
		}
		sets++
		masked, exact := 0, 0
		spans := map[[2]int32]int{} // the key vectors the kernel computed, where it reports them
		for trial := 0; trial < 1000; trial++ {
			d := dims[rng.IntN(len(dims))]
			q, qok := guarded(rng, 4*d, normal)
			kt, ktok := guarded(rng, d*panel, normal)
			s, sok := guarded(rng, 4*panel, normal)
			scale := float32(6 / math.Sqrt(float64(d)))
			m, l := make([]float32, 4), make([]float32, 4)
			fresh := trial%3 == 0 // no old maxima: the unfused step's case
			var b rowBounds
			narrow, base, w := trial%4 == 2, rng.IntN(panel), rng.IntN(24) // a group's rows a key apart
			diagonal := trial%8 == 3                                       // every row from the panel's first key, as on a causal diagonal
			// One trial in ten spans the key vectors runs[trial/10%10]
			// exactly, so that every run is tested whatever the seed.
			run, targeted := runs[trial/10%len(runs)], trial%10 == 9
			for r := range 4 {
				lo := rng.IntN(panel + 1)
				hi := lo + rng.IntN(panel+1-lo)
				if narrow {
					lo = min(base+r, panel)
					hi = min(lo+w, panel)
				}
				if diagonal {
					lo, hi = 0, min(base+r+1, panel)
				}
				switch c := rng.IntN(5); {
				case targeted:
					lo, hi = spanning(rng, run, r == 0)
				case c == 0:
					lo, hi = 0, panel
				case c == 1:
					hi = min(lo+1, panel)
				}
				b.lo[r], b.hi[r] = int32(lo), int32(hi)
				switch {
				case fresh:
					m[r], l[r] = -inf, 0
					b.lo[r], b.hi[r] = int32(min(lo, panel-1)), int32(max(hi, min(lo, panel-1)+1))
				case rng.IntN(4) == 0 && lo < hi:
					m[r], l[r] = -inf, 0
				default:
					m[r], l[r] = float32(4*rng.NormFloat64()), float32(rng.Float64()*50)
				}
			}
			var c float32 // the softcap, or 0
			if fresh || rng.IntN(2) == 0 {
				c = caps[rng.IntN(len(caps))]
				b.m2, b.ck = -2/c, c*float32(math.Log2E)
			}
			switch rng.IntN(8) {
			case 0: // a column of ±Inf (and NaN where a q element is 0)
				kt[rng.IntN(d*panel)] = inf * float32(1-2*rng.IntN(2))
			case 1: // a column of NaN: one NaN score per row, inside some rows' bounds or not
				kt[rng.IntN(d*panel)] = nan
			}
			if trial%50 == 7 && !fresh {
				m[rng.IntN(4)] = nan
			}
			ws, wm, wl := make([]float32, 4*panel), append([]float32(nil), m...), append([]float32(nil), l...)
			mOld := append([]float32(nil), m...)
			var wa, a [8]float32
			ks.scores4(ws, q, kt, d, 1)
			softmax4BoundedGo(ks, ws, scale, wm, wl, &wa, &b)
			ks.scoresSoftmaxBounded4(s, q, kt, d, scale, m, l, &a, &b)
			spans[[2]int32{b.c0, b.n}]++
			if targeted && b.n != 0 && [2]int{int(b.c0), int(b.n)} != run {
				t.Fatalf("%s: bounds %v..%v need key vectors [c0, n] %v, the kernel's wrapper set [%d %d]", ks.name, b.lo, b.hi, run, b.c0, b.n)
			}
			where := fmt.Sprintf("%s d=%d bounds %v..%v softcap ck %v", ks.name, d, b.lo, b.hi, b.ck)
			if msg := softmax4Mismatch(s, m, l, a[:], ws, wm, wl, wa[:], mOld); msg != "" {
				t.Fatalf("%s: %s (m %v -> %v, want %v; l %v want %v; alpha %v want %v)", where, msg, mOld, m, wm, l, wl, a[:4], wa[:4])
			}
			for r := range 4 {
				if l[r] != l[r] {
					continue
				}
				for j := range panel {
					if (j < int(b.lo[r]) || j >= int(b.hi[r])) && s[r*panel+j] != 0 {
						t.Fatalf("%s: weight [%d][%d] = %v outside the bounds, want 0", where, r, j, s[r*panel+j])
					}
				}
				if b.lo[r] > 0 || b.hi[r] < panel {
					masked++
				}
			}
			if fresh && b.ck != 0 {
				exact++
				u := make([]float32, 4*panel)
				ks.scores4(u, q, kt, d, scale)
				softcapRow(ks, u, c, make([]float32, 4*panel))
				for r := range 4 {
					if l[r] != l[r] { // a NaN score: the unfused row is all NaN
						continue
					}
					row := u[r*panel+int(b.lo[r]) : r*panel+int(b.hi[r])]
					ks.expSum(row, ks.rowMax(row))
					got := s[r*panel+int(b.lo[r]) : r*panel+int(b.hi[r])]
					if j := firstMismatch(got, row, 0); j >= 0 && !(got[j] != got[j] && row[j] != row[j]) {
						t.Fatalf("%s: weight [%d][%d] = %v, the unfused step's %v", where, r, int(b.lo[r])+j, got[j], row[j])
					}
				}
			}
			for _, ok := range []func() error{qok, ktok, sok} {
				if err := ok(); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Logf("%s: %d masked rows, %d softcapped steps against the unfused one, key vectors [c0, n]: %v", ks.name, masked, exact, spans)
	}
	if sets == 0 {
		t.Skip("no kernel set here has a bounded step")
	}
}

// runs are the runs of key vectors of 16 [c0, c0+n) that a panel's four
// rows can need, as keyVectors sets them.
var runs = [][2]int{{0, 1}, {0, 2}, {0, 3}, {0, 4}, {1, 1}, {1, 2}, {1, 3}, {2, 1}, {2, 2}, {3, 1}}

// spanning draws a row's key bounds [lo, hi) inside the key vectors run;
// the first row's (first true) starts in the run's first vector and ends
// in its last, so that a group's bounds need exactly the run.
func spanning(rng *rand.Rand, run [2]int, first bool) (lo, hi int) {
	start, end := 16*run[0], 16*(run[0]+run[1])
	if first {
		lo = start + rng.IntN(16)
		last := max(end-16, lo) // hi in (last, end]: in the run's last vector
		return lo, last + 1 + rng.IntN(end-last)
	}
	lo = start + rng.IntN(end-start) // below end, as a fresh row's bounds keep it
	return lo, lo + rng.IntN(end-lo+1)
}

// TestAllFinite holds every set's allFinite to allFiniteGo: random lengths
// (whole vectors and not), one ±Inf or NaN at a random place or none.
func TestAllFinite(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	bad := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, ks := range kernelSets {
		found := 0
		for trial := 0; trial < 2000; trial++ {
			x, ok := guarded(rng, rng.IntN(200), func(int) float32 { return float32(rng.NormFloat64() * 1e30) })
			if len(x) > 0 && rng.IntN(3) > 0 {
				x[rng.IntN(len(x))] = bad[rng.IntN(len(bad))]
			}
			want := allFiniteGo(x)
			if got := ks.allFinite(x); got != want {
				t.Fatalf("%s: allFinite of %d elements = %v, want %v", ks.name, len(x), got, want)
			}
			if !want {
				found++
			}
			if err := ok(); err != nil {
				t.Fatal(err)
			}
		}
		if found == 0 {
			t.Errorf("%s: no trial held a non-finite element", ks.name)
		}
	}
}

// TestStepsBounded4 holds every set's stepsBounded4 to its own
// scoresSoftmaxBounded4 and pv4 called group by group (stepsBounded4 in
// reference_test.go), bit for bit: random group counts and head dims
// (multiples of 16 and not); one rowBounds for all groups (every key, a
// softcap: as attendRows passes a softcap's full groups) or one a group
// (rows that see part of the panel, softcapped or not, P·V over the keys
// of all four rows); guard regions around every slice.
func TestStepsBounded4(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 10))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{8, 16, 40, 64, 96, 128, 256}
	for _, ks := range kernelSets {
		if ks.stepsBounded4 == nil {
			continue
		}
		for trial := 0; trial < 200; trial++ {
			d, groups := dims[rng.IntN(len(dims))], 1+rng.IntN(16)
			rows := 4 * groups
			q, qok := guarded(rng, rows*d, normal)
			kt, ktok := guarded(rng, d*panel, normal)
			v, vok := guarded(rng, panel*d, normal)
			got := newStepState(rng, rows, d, normal)
			want := got.clone()
			scale := float32(1 / math.Sqrt(float64(d)))
			b := testBounds(rng, trial, groups)
			wb := append([]rowBounds(nil), b...)
			var a, wa [8]float32
			stepsBounded4(ks, want.s, q, kt, v, want.acc, d, scale, want.m, want.l, &wa, groups, wb)
			ks.stepsBounded4(got.s, q, kt, v, got.acc, d, scale, got.m, got.l, &a, groups, ahead{}, b)
			if err := got.compare(want, qok, ktok, vok); err != nil {
				t.Fatalf("%s d=%d groups=%d bounds %v: %v", ks.name, d, groups, b, err)
			}
		}
	}
}

// testBounds returns the rowBounds of a trial of the bounded steps' tests
// with groups groups: two trials in three softcapped (a cap in [1, 51]);
// odd trials part of the panel, a group's rows a key apart or apart at
// random (one rowBounds a group), even ones the whole panel (one for all).
func testBounds(rng *rand.Rand, trial, groups int) []rowBounds {
	var m2, ck float32
	if trial%3 != 2 {
		c := float32(1 + 50*rng.Float64())
		m2, ck = -2/c, c*float32(math.Log2E)
	}
	if trial%2 == 0 {
		return []rowBounds{{hi: [4]int32{panel, panel, panel, panel}, m2: m2, ck: ck, pn: panel}}
	}
	b := make([]rowBounds, groups)
	for g := range b {
		base, w := rng.IntN(panel-3), 1+rng.IntN(panel)
		lo4, hi4 := panel, 0
		for r := range 4 {
			lo := base + r
			hi := min(panel, lo+w)
			if rng.IntN(3) == 0 {
				lo = rng.IntN(panel)
				hi = lo + 1 + rng.IntN(panel-lo)
			}
			b[g].lo[r], b[g].hi[r] = int32(lo), int32(hi)
			lo4, hi4 = min(lo4, lo), max(hi4, hi)
		}
		b[g].m2, b[g].ck, b[g].p0, b[g].pn = m2, ck, int32(lo4), int32(hi4-lo4)
	}
	return b
}
