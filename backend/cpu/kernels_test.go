package cpu

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// expError returns the largest error in ulps of f against exact on every
// 101st float32 of [-neg, pos] (-short: every 1009th), pos excluded.
func expError(f func(float32) float32, exact func(float64) float64, neg, pos float32) float64 {
	var worst float64
	step := uint32(101)
	if testing.Short() {
		step = 1009
	}
	for b := math.Float32bits(0); b < math.Float32bits(pos); b += step {
		x := math.Float32frombits(b)
		worst = max(worst, ulpError(f(x), exact(float64(x))))
	}
	for b := math.Float32bits(0); b <= math.Float32bits(neg); b += step {
		x := -math.Float32frombits(b)
		worst = max(worst, ulpError(f(x), exact(float64(x))))
	}
	return worst
}

// TestExp32 measures exp32 against math.Exp on [-87.33, 88.72) (the
// normal-result range) and pins its special cases.
func TestExp32(t *testing.T) {
	worst := expError(exp32, math.Exp, 87.33, 88.72)
	t.Logf("exp32: max error %.2f ulp", worst)
	if worst > 4 {
		t.Errorf("exp32 error %.2f ulp exceeds 4", worst)
	}
	inf := float32(math.Inf(1))
	if exp32(-inf) != 0 || exp32(inf) != inf || !math.IsNaN(float64(exp32(float32(math.NaN())))) || exp32(0) != 1 || exp32(-100) != 0 {
		t.Error("special cases")
	}
}

// TestExp2_32 measures exp2_32 against math.Exp2 on [-126, 128) (the
// normal-result range) and pins its special cases.
func TestExp2_32(t *testing.T) {
	worst := expError(exp2_32, math.Exp2, 126, 128)
	t.Logf("exp2_32: max error %.2f ulp", worst)
	if worst > 4 {
		t.Errorf("exp2_32 error %.2f ulp exceeds 4", worst)
	}
	inf := float32(math.Inf(1))
	if exp2_32(-inf) != 0 || exp2_32(inf) != inf || exp2_32(128) != inf || !math.IsNaN(float64(exp2_32(float32(math.NaN())))) ||
		exp2_32(0) != 1 || exp2_32(-126) != 0x1p-126 || exp2_32(-127) != 0x1p-127 || exp2_32(-149) != 0x1p-149 ||
		exp2_32(-150.5) != 0 || exp2_32(-1e30) != 0 || exp2_32(-3) != 0.125 {
		t.Error("special cases")
	}
	// Below the normal range, rounded to subnormals: within 4 of their
	// steps, the 4 ulps allowed at 2^-126 (2^f's error there is 2.7 steps
	// of 2^-150).
	for x := float32(-126); x >= -152; x -= 0.0137 {
		if got, want := float64(exp2_32(x)), math.Exp2(float64(x)); !(math.Abs(got-want) <= 4*0x1p-149) {
			t.Fatalf("exp2_32(%v) = %g, want %g", x, got, want)
		}
	}
}

// TestFMA32 holds fma32 to a·b+c rounded once, from math/big: random
// operands over wide exponent ranges, and sums built to sit just off a
// float32 tie by less than float64 resolves, where rounding to float64 and
// then to float32 goes the wrong way.
func TestFMA32(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 31))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	random := func() float32 {
		return float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(60)-30))
	}
	ties := 0
	for trial := 0; trial < 20000; trial++ {
		a, b, c := random(), random(), random()
		if trial%2 == 1 {
			// c with an odd last bit, a·b = half c's ulp times
			// (1 - 2^-46): the exact sum is just below the tie, which
			// float64 cannot tell from the tie itself.
			e := rng.IntN(40) - 20
			c = math.Float32frombits(math.Float32bits(float32(math.Ldexp(1, e))) | 1)
			a = float32(math.Ldexp(1+0x1p-23, e/2-12))
			b = float32(math.Ldexp(1-0x1p-23, e-e/2-12))
			if rng.IntN(2) == 0 {
				a, c = -a, -c
			}
			ties++
		}
		want := exact(a, b, c)
		if got := fma32(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	t.Logf("%d sums next to a tie", ties)
}

// TestLog32 measures log32 against math.Log on every 97th positive normal
// float32 (-short: every 997th) and pins its special cases.
func TestLog32(t *testing.T) {
	var worst float64
	step := uint32(97)
	if testing.Short() {
		step = 997
	}
	for b := uint32(0x00800000); b < 0x7f800000; b += step {
		x := math.Float32frombits(b)
		worst = max(worst, ulpError(log32(x), math.Log(float64(x))))
	}
	t.Logf("log32: max error %.2f ulp", worst)
	if worst > 1 {
		t.Errorf("log32 error %.2f ulp exceeds 1", worst)
	}
	inf := float32(math.Inf(1))
	sub := math.Float32frombits(1)
	if log32(1) != 0 || log32(0) != -inf || log32(inf) != inf || !math.IsNaN(float64(log32(-1))) ||
		!math.IsNaN(float64(log32(float32(math.NaN())))) || log32(sub) != float32(math.Log(float64(sub))) {
		t.Error("special cases")
	}
}

// ulpError is |got-want| in float32 ulps of want: 0 when both are NaN or
// equal (infinities included), +Inf when only one is NaN or infinite, so
// that a comparison "ulpError > limit" can never pass a NaN.
func ulpError(got float32, want float64) float64 {
	gn, wn := got != got, want != want
	switch {
	case gn && wn, float64(got) == want:
		return 0
	case gn || wn || math.IsInf(want, 0) || math.IsInf(float64(got), 0):
		return math.Inf(1)
	}
	w := float32(want)
	ulp := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
	return math.Abs(float64(got)-want) / ulp
}

// firstMismatch returns the first index where got and want differ by more
// than ulps (NaN only matches NaN), or -1. Every lane is compared; lengths
// that differ are a mismatch at 0.
func firstMismatch(got, want []float32, ulps float64) int {
	if len(got) != len(want) {
		return 0
	}
	for i := range want {
		if !(ulpError(got[i], float64(want[i])) <= ulps) {
			return i
		}
	}
	return -1
}

// TestMismatchCatchesBadLanes: the lane comparison the kernel tests use
// reports a NaN lane, a wrong last lane of 16, an Inf for a finite, a
// finite for a NaN and a short result.
func TestMismatchCatchesBadLanes(t *testing.T) {
	base := make([]float32, 16)
	for i := range base {
		base[i] = float32(i) + 0.5
	}
	for name, bad := range map[string]func(got, want []float32) []float32{
		"NaN in lane 3":  func(g, _ []float32) []float32 { g[3] = float32(math.NaN()); return g },
		"lane 15 wrong":  func(g, _ []float32) []float32 { g[15] *= 1.01; return g },
		"+Inf in lane 9": func(g, _ []float32) []float32 { g[9] = float32(math.Inf(1)); return g },
		"NaN wanted":     func(g, w []float32) []float32 { w[0] = float32(math.NaN()); return g },
		"one lane short": func(g, _ []float32) []float32 { return g[:15] },
	} {
		got, want := append([]float32(nil), base...), append([]float32(nil), base...)
		if firstMismatch(bad(got, want), want, 4) < 0 {
			t.Errorf("%s: not reported", name)
		}
	}
	if i := firstMismatch(base, append([]float32(nil), base...), 4); i >= 0 {
		t.Errorf("equal lanes reported at %d", i)
	}
}

// TestExpSumError measures every kernel set's expSum, as an exponential,
// against math.Exp (math.Exp2 for a base-2 set) on every 37th float32 of its
// softmax domain, [-87.3, 0] ([-126, 0]; -short: every 1009th), and checks
// its zero and NaN cases.
func TestExpSumError(t *testing.T) {
	step := uint32(37)
	if testing.Short() {
		step = 1009
	}
	for _, ks := range kernelSets {
		exact, lo := math.Exp, float32(87.33)
		if ks.base2 {
			exact, lo = math.Exp2, 126
		}
		var xs []float32
		for b := math.Float32bits(0); b < math.Float32bits(lo); b += step {
			xs = append(xs, -math.Float32frombits(b))
		}
		xs = xs[:len(xs)&^63]
		var worst float64
		s := make([]float32, 64)
		for i := 0; i < len(xs); i += 64 {
			copy(s, xs[i:i+64])
			ks.expSum(s, 0)
			for j, e := range s {
				worst = max(worst, ulpError(e, exact(float64(xs[i+j]))))
			}
		}
		t.Logf("%s: expSum max error %.2f ulp over %d points", ks.name, worst, len(xs))
		if worst > 4 {
			t.Errorf("%s: expSum error %.2f ulp exceeds 4", ks.name, worst)
		}
		nan := float32(math.NaN())
		inf := float32(math.Inf(1))
		// Sixteen lanes (a full AVX-512 vector), every one compared; below
		// the normal range (-87.3) the natural kernels flush to 0, and the
		// base-2 ones (below -126) round to subnormals.
		s = []float32{-inf, nan, -lo - 0.1, -130, 0, -1e30, 1.5, 2, 2.25, -3, 1, 0.5, -inf, -20, 1.75, -40}
		want := make([]float32, len(s))
		for j, x := range s {
			if d := x - 2; d > -lo || ks.base2 { // x - 2 rounded, as the kernels round it
				want[j] = float32(exact(float64(d)))
			}
		}
		want[1] = nan
		ks.expSum(s, 2)
		if j := firstMismatch(s, want, 4); j >= 0 {
			t.Errorf("%s: expSum special case %d: got %v, want %v", ks.name, j, s[j], want[j])
		}
	}
}

// guarded returns a slice of n elements at a random misalignment inside a
// larger buffer whose other elements are a poison value, and a check that
// the poison is intact.
func guarded(rng *rand.Rand, n int, fill func(i int) float32) ([]float32, func() error) {
	const guard = 37
	off := rng.IntN(8)
	buf := make([]float32, off+n+guard+guard)
	poison := float32(math.Float32frombits(0x7fa5a5a5)) // a signalling NaN pattern
	for i := range buf {
		buf[i] = poison
	}
	s := buf[guard+off : guard+off+n : guard+off+n]
	for i := range s {
		s[i] = fill(i)
	}
	return s, func() error {
		for i, x := range buf {
			if (i < guard+off || i >= guard+off+n) && math.Float32bits(x) != 0x7fa5a5a5 {
				return fmt.Errorf("guard element %d overwritten (slice at [%d, %d))", i, guard+off, guard+off+n)
			}
		}
		return nil
	}
}

// close reports whether got is within a multiple of float32 rounding of
// want, for a sum of n terms whose magnitudes add up to mag.
func close(got, want float32, n int, mag float64) bool {
	if got != got || want != want {
		return got != got && want != want
	}
	return math.Abs(float64(got)-float64(want)) <= 2*float64(n+2)*0x1p-24*mag+1e-30
}

// TestKernels holds every kernel set's kernels to the Go loops on random
// sizes, misaligned slices with guard regions, and for pv4/pv1 random
// alphas (including 1 and 0).
func TestKernels(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{1, 3, 8, 15, 16, 24, 40, 64, 72, 96, 128, 136, 256}
	for _, ks := range kernelSets {
		t.Run(ks.name, func(t *testing.T) {
			for trial := 0; trial < 200; trial++ {
				d := dims[rng.IntN(len(dims))]
				n := rng.IntN(panel + 1)
				if trial%10 == 0 {
					n = panel
				}
				// transpose, then scores4 on the set's own panel, against
				// transposePanel and scores4Go; n < panel keys leave zero
				// keys whose scores must be 0.
				q, qok := guarded(rng, 4*d, normal)
				kr, krok := guarded(rng, n*d, normal)
				kt, ktok := guarded(rng, d*panel, normal)
				s, sok := guarded(rng, 4*panel, normal)
				scale := float32(rng.Float64() + 0.1)
				ktWant := make([]float32, d*panel)
				transposePanel(ktWant, kr, d, n)
				want := make([]float32, 4*panel)
				scores4Go(want, q, ktWant, d, scale)
				ks.transpose(kt, kr, d, n)
				if !ks.rowPanels {
					for i, x := range ktWant {
						if kt[i] != x {
							t.Fatalf("transpose d=%d n=%d: kt[%d] = %v, want %v", d, n, i, kt[i], x)
						}
					}
				}
				ks.scores4(s, q, kt, d, scale)
				for r := range 4 {
					for j := range panel {
						var mag float64
						for i := range d {
							mag += math.Abs(float64(q[r*d+i]) * float64(ktWant[i*panel+j]))
						}
						if !close(s[r*panel+j], want[r*panel+j], d, mag*float64(scale)) {
							t.Fatalf("scores4 d=%d n=%d: s[%d][%d] = %v, want %v", d, n, r, j, s[r*panel+j], want[r*panel+j])
						}
					}
				}
				for _, ok := range []func() error{qok, krok, ktok, sok} {
					if err := ok(); err != nil {
						t.Fatalf("scores4 d=%d n=%d: %v", d, n, err)
					}
				}

				// pv4 and pv1
				p, pok := guarded(rng, 3*panel+n, func(int) float32 { return float32(rng.Float64()) })
				v, vok := guarded(rng, n*d, normal)
				acc, accok := guarded(rng, 4*d, normal)
				alpha := [4]float32{float32(rng.Float64()), 1, 0, float32(rng.Float64())}
				switch trial % 3 {
				case 1: // all 1: pv4 may skip the rescale
					alpha = [4]float32{1, 1, 1, 1}
				case 2: // all 1 but one
					alpha = [4]float32{1, 1, 1, 1}
					alpha[rng.IntN(4)] = float32(rng.Float64())
				}
				wantAcc := append([]float32(nil), acc...)
				pv4Go(wantAcc, p, v, d, n, &alpha)
				old := append([]float32(nil), acc...)
				ks.pv4(acc, p, v, d, n, &alpha)
				if r, c, ok := pv4Within(acc, wantAcc, old, p, v, d, n, panel, &alpha); !ok {
					t.Fatalf("pv4 d=%d n=%d: acc[%d][%d] = %v, want %v", d, n, r, c, acc[r*d+c], wantAcc[r*d+c])
				}
				one := acc[:d]
				old1 := append([]float32(nil), one...)
				want1 := append([]float32(nil), one...)
				pv1Go(want1, p[:n], v, d, n, alpha[0])
				ks.pv1(one, p[:n], v, d, n, alpha[0])
				for c := range d {
					mag := math.Abs(float64(alpha[0] * old1[c]))
					for j := range n {
						mag += math.Abs(float64(p[j]) * float64(v[j*d+c]))
					}
					if !close(one[c], want1[c], n, mag) {
						t.Fatalf("pv1 d=%d n=%d: acc[%d] = %v, want %v", d, n, c, one[c], want1[c])
					}
				}
				for _, ok := range []func() error{pok, vok, accok} {
					if err := ok(); err != nil {
						t.Fatalf("pv d=%d n=%d: %v", d, n, err)
					}
				}

				// rowMax and expSum on a row of n scores, sometimes with
				// -Inf (masked) or NaN elements.
				row, rowok := guarded(rng, n, func(int) float32 { return float32(8 * rng.NormFloat64()) })
				if n > 0 && trial%7 == 1 {
					row[rng.IntN(n)] = float32(math.Inf(-1))
				}
				if n > 0 && trial%13 == 2 {
					row[rng.IntN(n)] = float32(math.NaN())
				}
				m, wantM := ks.rowMax(row), rowMaxGo(row)
				if !(m == wantM || m != m && wantM != wantM) {
					t.Fatalf("rowMax n=%d: %v, want %v", n, m, wantM)
				}
				if wantM != wantM || n == 0 {
					continue
				}
				wantRow := append([]float32(nil), row...)
				_, expSumRef := refExp(ks.base2)
				wantSum := expSumRef(wantRow, m)
				sum := ks.expSum(row, m)
				if j := firstMismatch(row, wantRow, 4); j >= 0 {
					t.Fatalf("expSum n=%d: e[%d] = %v, want %v", n, j, row[j], wantRow[j])
				}
				if !close(sum, wantSum, n, float64(wantSum)*4) {
					t.Fatalf("expSum n=%d: sum %v, want %v", n, sum, wantSum)
				}
				if err := rowok(); err != nil {
					t.Fatalf("row n=%d: %v", n, err)
				}
			}
		})
	}
}

// TestScaleRows holds every set's scaleRows to its definition, bit for bit:
// random head dims, row counts and output strides, guard regions around
// both slices, and factors 0 and 1 among the random ones.
func TestScaleRows(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 8))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	for _, ks := range kernelSets {
		for trial := 0; trial < 300; trial++ {
			d, rows := 1+rng.IntN(200), 1+rng.IntN(70)
			stride := d + rng.IntN(3)*rng.IntN(64)
			n := (rows-1)*stride + d
			src, srcOK := guarded(rng, rows*d, normal)
			dst, dstOK := guarded(rng, n, normal)
			f := make([]float32, rows)
			for r := range f {
				f[r] = []float32{0, 1, float32(rng.ExpFloat64())}[rng.IntN(3)]
			}
			want := append([]float32(nil), dst...)
			for r := range rows {
				for c := range d {
					want[r*stride+c] = f[r] * src[r*d+c]
				}
			}
			ks.scaleRows(dst, stride, src, d, f)
			if j := firstMismatch(dst, want, 0); j >= 0 {
				t.Fatalf("%s d=%d rows=%d stride=%d: dst[%d] = %v, want %v", ks.name, d, rows, stride, j, dst[j], want[j])
			}
			for _, ok := range []func() error{srcOK, dstOK} {
				if err := ok(); err != nil {
					t.Fatalf("%s d=%d rows=%d stride=%d: %v", ks.name, d, rows, stride, err)
				}
			}
		}
	}
}

// TestScoresSoftmax4 holds every fused scoresSoftmax4 to the set's own
// scores4 (its dot products, scale 1) followed by softmax4Go: random query rows and key panels, some
// with NaN or ±Inf elements (rows of NaN scores, columns of ±Inf or NaN);
// running maxima finite, -Inf or NaN; sums zero or not.
func TestScoresSoftmax4(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{1, 8, 16, 64, 96, 128, 256}
	// The steps of each kind a set took: a base2 set must take both.
	lazy, moved := map[string]int{}, map[string]int{}
	for _, ks := range kernelSets {
		if ks.scoresSoftmax4 == nil {
			continue
		}
		for trial := 0; trial < 500; trial++ {
			d := dims[rng.IntN(len(dims))]
			q, qok := guarded(rng, 4*d, normal)
			kt, ktok := guarded(rng, d*panel, normal)
			s, sok := guarded(rng, 4*panel, normal)
			scale := float32(6 / math.Sqrt(float64(d)))
			m := make([]float32, 4)
			l := make([]float32, 4)
			// One trial in four puts every old maximum near or above its
			// row's, where a base2 set's lazy rescale may keep m.
			near := trial%4 == 1
			for r := range 4 {
				switch c := rng.IntN(6); {
				case near:
					m[r], l[r] = float32(10+10*rng.Float64()), float32(rng.Float64()*50)
				case c == 0:
					m[r], l[r] = -inf, 0
				case c == 1:
					m[r], l[r] = float32(20*rng.Float64()), float32(rng.Float64()*50) // old max above the row's
				default:
					m[r], l[r] = float32(4*rng.NormFloat64()), float32(rng.Float64()*50)
				}
				if rng.IntN(40) == 0 {
					q[r*d+rng.IntN(d)] = nan
				}
			}
			switch rng.IntN(10) {
			case 0: // a column of ±Inf (and NaN where a q element is 0)
				kt[rng.IntN(d*panel)] = inf * float32(1-2*rng.IntN(2))
			case 1: // a column of NaN: one NaN score per row
				kt[rng.IntN(d*panel)] = nan
			}
			if trial%50 == 7 {
				m[rng.IntN(4)] = nan
			}
			ws, wm, wl := make([]float32, 4*panel), append([]float32(nil), m...), append([]float32(nil), l...)
			mOld := append([]float32(nil), m...)
			var wa, a [8]float32
			ks.scores4(ws, q, kt, d, 1) // the dot products
			softmax4Go(ws, scale, wm, wl, &wa)
			ks.scoresSoftmax4(s, q, kt, d, scale, m, l, &a)
			if msg := softmax4Mismatch(s, m, l, a[:], ws, wm, wl, wa[:], mOld); msg != "" {
				t.Fatalf("%s d=%d: %s", ks.name, d, msg)
			}
			if ks.base2 && [4]float32(wa[:4]) == [4]float32{1, 1, 1, 1} && [4]float32(wm) == [4]float32(mOld) && wl[0] == wl[0] {
				lazy[ks.name]++
			} else {
				moved[ks.name]++
			}
			for _, ok := range []func() error{qok, ktok, sok} {
				if err := ok(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, ks := range kernelSets {
		name, n := ks.name, moved[ks.name]
		if ks.scoresSoftmax4 == nil {
			continue
		}
		t.Logf("%s: %d lazy steps, %d that moved m", name, lazy[name], n)
		if n == 0 || (ks.base2 && lazy[name] == 0) {
			t.Errorf("%s: %d lazy steps, %d that moved m: both kinds must be tested", name, lazy[name], n)
		}
	}
}

// softmax4Mismatch compares a softmax step's weights s, m, l and alpha with
// softmax4Go's ws, wm, wl and wa (mOld the maxima before the step), and
// says how they differ ("" if they agree). A row whose wl is NaN (a NaN in
// the row or in its old maximum) must have a NaN l; its m, alpha and
// weights may differ. The group's other rows then may have taken the other
// rescale (kernelSet.scoresSoftmax4): m is wm or, with alpha 1, mOld, and
// the weights and l agree once both are put on wm (times 2^(m-wm)).
func softmax4Mismatch(s, m, l, alpha, ws, wm, wl, wa, mOld []float32) string {
	nanGroup := false
	for r := range 4 {
		nanGroup = nanGroup || wl[r] != wl[r]
	}
	for r := range 4 {
		row, wrow := s[r*panel:(r+1)*panel], ws[r*panel:(r+1)*panel]
		if wl[r] != wl[r] {
			if l[r] == l[r] {
				return fmt.Sprintf("l[%d] = %v, want NaN", r, l[r])
			}
			continue
		}
		if m[r] == wm[r] {
			if !(ulpError(alpha[r], float64(wa[r])) <= 4) {
				return fmt.Sprintf("alpha[%d] = %v, want %v", r, alpha[r], wa[r])
			}
			if !close(l[r], wl[r], panel, float64(wl[r])*4) {
				return fmt.Sprintf("l[%d] = %v, want %v", r, l[r], wl[r])
			}
			if j := firstMismatch(row, wrow, 4); j >= 0 {
				return fmt.Sprintf("e[%d][%d] = %v, want %v", r, j, row[j], wrow[j])
			}
			continue
		}
		if !nanGroup || m[r] != mOld[r] || alpha[r] != 1 {
			return fmt.Sprintf("m[%d] = %v alpha %v, want %v alpha %v (old m %v)", r, m[r], alpha[r], wm[r], wa[r], mOld[r])
		}
		f := math.Exp2(float64(m[r]) - float64(wm[r]))
		if !close(float32(float64(l[r])*f), wl[r], panel, float64(wl[r])*8) {
			return fmt.Sprintf("l[%d]·2^(m-wm) = %v, want %v", r, float64(l[r])*f, wl[r])
		}
		for j := range row {
			// Each side rounds its x - m once, x the scaled score c·dot
			// (2^-24 of |x| + |m| at most, a relative error of ln2 times
			// that in 2^(x-m)), and then exponentiates within 4 ulp:
			// with x = wm + log2(want).
			want := float64(wrow[j])
			if float64(row[j])*f == want { // a masked key's 0, among others
				continue
			}
			x := float64(wm[r]) + math.Log2(want)
			tol := 0x1p-24 * (8 + math.Ln2*(2*math.Abs(x)+math.Abs(float64(m[r]))+math.Abs(float64(wm[r]))))
			if got := float64(row[j]) * f; !(math.Abs(got-want) <= tol*want+1e-30) {
				return fmt.Sprintf("e[%d][%d]·2^(m-wm) = %v, want %v", r, j, got, wrow[j])
			}
		}
	}
	return ""
}

// TestSteps4 holds every set's steps4 to its own scoresSoftmax4 and pv4
// called group by group (steps4 in reference_test.go), bit for bit: random
// group counts and head dims (multiples of 16 and not), running maxima
// finite or -Inf, guard regions around every slice.
func TestSteps4(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{8, 16, 40, 64, 96, 128}
	for _, ks := range kernelSets {
		if ks.steps4 == nil {
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
			var a, wa [8]float32
			steps4(ks, want.s, q, kt, v, want.acc, d, scale, want.m, want.l, &wa, groups)
			ks.steps4(got.s, q, kt, v, got.acc, d, scale, got.m, got.l, &a, groups, ahead{})
			if err := got.compare(want, qok, ktok, vok); err != nil {
				t.Fatalf("%s d=%d groups=%d: %v", ks.name, d, groups, err)
			}
		}
	}
}

// stepState is the state a steps4 call updates: the weights s, the
// accumulators acc and the rows' running maxima m and sums l, each in a
// guard region (ok checks them).
type stepState struct {
	s, acc, m, l []float32
	ok           []func() error
}

// newStepState returns random state for rows rows of head dimension d, a
// quarter of the rows with no key seen yet (m -Inf, l 0).
func newStepState(rng *rand.Rand, rows, d int, normal func(int) float32) stepState {
	var st stepState
	var sok, accok, mok, lok func() error
	st.s, sok = guarded(rng, 4*panel, normal)
	st.acc, accok = guarded(rng, rows*d, normal)
	st.m, mok = guarded(rng, rows, func(int) float32 { return float32(4 * rng.NormFloat64()) })
	st.l, lok = guarded(rng, rows, func(int) float32 { return float32(50 * rng.Float64()) })
	for r := range rows {
		if rng.IntN(4) == 0 {
			st.m[r], st.l[r] = float32(math.Inf(-1)), 0
		}
	}
	st.ok = []func() error{sok, accok, mok, lok}
	return st
}

// clone returns a copy of st's slices, without guards, for a reference to
// update.
func (st stepState) clone() stepState {
	return stepState{s: slices.Clone(st.s), acc: slices.Clone(st.acc), m: slices.Clone(st.m), l: slices.Clone(st.l)}
}

// compare reports the first element of st that differs from want's bit for
// bit, or a guard region written (st's and the extra ones).
func (st stepState) compare(want stepState, extra ...func() error) error {
	for _, c := range []struct {
		name      string
		got, want []float32
	}{{"acc", st.acc, want.acc}, {"m", st.m, want.m}, {"l", st.l, want.l}, {"weights", st.s, want.s}} {
		if j := firstMismatch(c.got, c.want, 0); j >= 0 {
			return fmt.Errorf("%s[%d] = %v, want %v", c.name, j, c.got[j], c.want[j])
		}
	}
	for _, ok := range append(st.ok, extra...) {
		if err := ok(); err != nil {
			return err
		}
	}
	return nil
}

// TestISAs: every kernel set is selectable and "go" is always there.
func TestISAs(t *testing.T) {
	isas := ISAs()
	if isas[len(isas)-1] != "go" {
		t.Fatalf("ISAs() = %v: want go last", isas)
	}
	for _, isa := range isas {
		b, err := NewISA(1, isa)
		if err != nil || b.ISA() != isa {
			t.Fatalf("NewISA(%q) = %v, %v", isa, b, err)
		}
	}
	if _, err := NewISA(1, "sse9"); err == nil {
		t.Fatal("NewISA(sse9) succeeded")
	}
	t.Logf("this CPU runs %v", isas)
}

// TestFMAPeakFlops: BenchmarkPeakFMA's loop reports the flops of its 24
// (AVX-512) or 12 (AVX2) vector FMAs an iteration where the CPU and build
// have the set, and none for any other name.
func TestFMAPeakFlops(t *testing.T) {
	for _, c := range []struct {
		isa   string
		flops float64 // per iteration
	}{{"avx512", 24 * 16 * 2}, {"avx2", 12 * 8 * 2}, {"go", 0}, {"sse9", 0}} {
		want := 0.0
		if c.flops > 0 && slices.Contains(ISAs(), c.isa) {
			want = 1000 * c.flops
		}
		if got := fmaPeak(c.isa, 1000); got != want {
			t.Errorf("fmaPeak(%q, 1000) = %v flops, want %v", c.isa, got, want)
		}
	}
}

// BenchmarkKernels: the two product micro-kernels of every set, and the
// fused scores and softmax step where the set has one, on one 64-key panel
// with D = 64 (4 rows x 64 keys x 64, two flops per multiply-add; the
// softmax's work is not counted).
func BenchmarkKernels(b *testing.B) {
	const d = 64
	s, q, kt := make([]float32, 4*panel), make([]float32, 4*d), make([]float32, d*panel)
	acc, v := make([]float32, 4*d), make([]float32, panel*d)
	alpha := [4]float32{1, 1, 1, 1}
	flops := float64(2 * 4 * panel * d)
	for _, ks := range kernelSets {
		b.Run("scores4/"+ks.name, func(b *testing.B) {
			for b.Loop() {
				ks.scores4(s, q, kt, d, 1)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		if ks.scoresSoftmax4 != nil {
			// scores4 and the softmax step: its time less scores4's is
			// what the softmax costs.
			b.Run("scoresSoftmax4/"+ks.name, func(b *testing.B) {
				m, l := make([]float32, 4), make([]float32, 4)
				var a [8]float32
				for b.Loop() {
					ks.scoresSoftmax4(s, q, kt, d, 1, m, l, &a)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		b.Run("pv4/"+ks.name, func(b *testing.B) {
			for b.Loop() {
				ks.pv4(acc, s, v, d, panel, &alpha)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// pv4Within says whether every output of a pv4 (acc, from old, weights p
// with rows stride apart, values v) is close to want within the bound of
// its n products' magnitudes, and if not, the first row and column that
// is not.
func pv4Within(acc, want, old, p, v []float32, d, n, stride int, alpha *[4]float32) (r, c int, ok bool) {
	for r := range 4 {
		for c := range d {
			mag := math.Abs(float64(alpha[r] * old[r*d+c]))
			for j := range n {
				mag += math.Abs(float64(p[r*stride+j]) * float64(v[j*d+c]))
			}
			if !close(acc[r*d+c], want[r*d+c], n, mag) {
				return r, c, false
			}
		}
	}
	return 0, 0, true
}
