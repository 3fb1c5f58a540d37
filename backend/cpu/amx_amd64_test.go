//go:build !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/sdpatest"
	"golang.org/x/sys/cpu"
)

// amxTestable reports whether this CPU runs the AMX path's AVX-512 kernels
// (the splits, the update and softmax4); the tile products need hasAMX too.
func amxTestable(t *testing.T) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasFMA {
		t.Skip("no AVX-512BW: the AMX path's kernels do not run on this CPU")
	}
}

// amxValue draws an input for the splits: mostly normal values of every
// scale, with zeros, subnormals, values just around 2^-101, ±Inf and NaN.
func amxValue(rng *rand.Rand) float32 {
	switch rng.IntN(40) {
	case 0:
		return 0
	case 1:
		return float32(math.Copysign(0, -1))
	case 2:
		return math.Float32frombits(uint32(rng.IntN(1 << 23))) // subnormal
	case 3:
		return math.Float32frombits(0x0D000000 - 1 + uint32(rng.IntN(3))) // around 2^-101
	case 4:
		return float32(math.Inf(1 - 2*rng.IntN(2)))
	case 5:
		return float32(math.NaN())
	case 6, 7, 8:
		return float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(200)-100))
	}
	return float32(rng.NormFloat64())
}

// TestAMXSplit holds the assembly splits to the Go loops bit for bit
// (parts and the keep flag) on random strides and guarded buffers, and the
// Go split to its contract: h + m + l == x exactly for every finite x, and
// the flag false exactly where an element is non-finite or a non-zero
// below 2^-101.
func TestAMXSplit(t *testing.T) {
	amxTestable(t)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	for trial := 0; trial < 300; trial++ {
		clean := trial%3 != 0 // no special values: the flag must be true
		val := func(int) float32 {
			if clean {
				return float32(rng.NormFloat64())
			}
			return amxValue(rng)
		}
		// Rows.
		rows, chunks := 1+rng.IntN(17), 1+rng.IntN(4)
		srcRow, dstRow := 32*chunks+rng.IntN(9), 32*chunks+rng.IntN(9)
		src, srcOK := guarded(rng, (rows-1)*srcRow+32*chunks, val)
		dstPart := rows*dstRow + rng.IntN(5)
		if trial%4 == 3 {
			dstPart = 0 // h alone, as for exact operands
		}
		n := max(3*dstPart, rows*dstRow)
		got, want := make([]uint16, n), make([]uint16, n)
		okGot := amxSplitRowsAsm(got, dstPart, dstRow, src, srcRow, rows, chunks)
		okWant := amxSplitRowsGo(want, dstPart, dstRow, src, srcRow, rows, chunks)
		if okGot != okWant || (clean && !okGot) {
			t.Fatalf("splitRows trial %d: ok %v, Go %v (clean %v)", trial, okGot, okWant, clean)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("splitRows trial %d: element %d = %#04x, Go %#04x", trial, i, got[i], want[i])
			}
		}
		// Pairs.
		pairs, vecs := 1+rng.IntN(16), 1+rng.IntN(4)
		srcRowP := 16*vecs + rng.IntN(5)
		srcPair := 2*srcRowP + rng.IntN(5)
		srcP, srcPOK := guarded(rng, (pairs-1)*srcPair+srcRowP+16*vecs, val)
		dstPair := 32 + rng.IntN(3)*32
		dstVec := pairs*dstPair + rng.IntN(3)*32
		dstPartP := vecs*dstVec + rng.IntN(5)
		if trial%4 == 3 {
			dstPartP = 0
		}
		nP := max(3*dstPartP, vecs*dstVec)
		gotP, wantP := make([]uint16, nP), make([]uint16, nP)
		okGot = amxSplitPairsAsm(gotP, dstPartP, dstVec, dstPair, srcP, srcPair, srcRowP, pairs, vecs)
		okWant = amxSplitPairsGo(wantP, dstPartP, dstVec, dstPair, srcP, srcPair, srcRowP, pairs, vecs)
		if okGot != okWant || (clean && !okGot) {
			t.Fatalf("splitPairs trial %d: ok %v, Go %v (clean %v)", trial, okGot, okWant, clean)
		}
		for i := range gotP {
			if gotP[i] != wantP[i] {
				t.Fatalf("splitPairs trial %d: element %d = %#04x, Go %#04x", trial, i, gotP[i], wantP[i])
			}
		}
		for _, ok := range []func() error{srcOK, srcPOK} {
			if err := ok(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 200000; i++ {
		x := amxValue(rng)
		h, m, l, ok := amxSplit(x)
		b := math.Float32bits(x) & 0x7FFFFFFF
		wantOK := b == 0 || (b >= 0x0D000000 && b < 0x7F800000)
		if ok != wantOK {
			t.Fatalf("amxSplit(%g): ok %v, want %v", x, ok, wantOK)
		}
		for _, p := range []float32{h, m, l} {
			if ok && math.Float32bits(p)&0xFFFF != 0 {
				t.Fatalf("amxSplit(%g): part %g is not a bfloat16", x, p)
			}
		}
		if !math.IsInf(float64(x), 0) && x == x && float64(h)+float64(m)+float64(l) != float64(x) {
			t.Fatalf("amxSplit(%g) = %g + %g + %g", x, h, m, l)
		}
	}
}

// TestAMXUpdate holds the assembly update to the Go loop within one
// rounding (the assembly fuses the multiply-add).
func TestAMXUpdate(t *testing.T) {
	amxTestable(t)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 12))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	for trial := 0; trial < 100; trial++ {
		d, rows := 16*(1+rng.IntN(16)), 1+rng.IntN(16)
		acc, accOK := guarded(rng, rows*d, normal)
		tt, tOK := guarded(rng, rows*d, normal)
		alpha, aOK := guarded(rng, rows, func(int) float32 { return float32(rng.Float64()) })
		want := append([]float32(nil), acc...)
		amxUpdateGo(want, tt, d, alpha, rows)
		amxUpdateAsm(acc, tt, d, alpha, rows)
		for i := range acc {
			if !close(acc[i], want[i], 2, math.Abs(float64(want[i]))+math.Abs(float64(tt[i]))) {
				t.Fatalf("trial %d: acc[%d] = %v, want %v", trial, i, acc[i], want[i])
			}
		}
		for _, ok := range []func() error{accOK, tOK, aOK} {
			if err := ok(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAMXSoftmax4 holds softmax4 (on dot products) to softmax4Go, and
// softmax4Bounded to softmax4BoundedGo, as TestScoresSoftmax4 and
// TestScoresSoftmaxBounded4 hold the fused kernels.
func TestAMXSoftmax4(t *testing.T) {
	amxTestable(t)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	for trial := 0; trial < 300; trial++ {
		scale := float32(0.1 + rng.Float64())
		s, sOK := guarded(rng, 4*panel, func(int) float32 { return float32(4 * rng.NormFloat64()) })
		if trial%20 == 3 {
			s[rng.IntN(4*panel)] = float32(math.NaN())
		}
		m, l := make([]float32, 4), make([]float32, 4)
		for r := range 4 {
			m[r], l[r] = float32(4*rng.NormFloat64()), float32(50*rng.Float64())
			if rng.IntN(5) == 0 {
				m[r], l[r] = float32(math.Inf(-1)), 0
			}
		}
		ws := append([]float32(nil), s...)
		wm, wl := append([]float32(nil), m...), append([]float32(nil), l...)
		mOld := append([]float32(nil), m...)
		var wa [8]float32
		alpha := make([]float32, 8)
		// Every other trial masks the rows to key bounds (softmax4Bounded),
		// each row seeing a key where its m is -Inf.
		if trial%2 == 1 {
			var b rowBounds
			for r := range 4 {
				lo := rng.IntN(panel)
				b.lo[r], b.hi[r] = int32(lo), int32(lo+1+rng.IntN(panel-lo))
				if m[r] > float32(math.Inf(-1)) && rng.IntN(4) == 0 {
					b.hi[r] = b.lo[r] // no key
				}
			}
			softmax4BoundedGo(&avx512Kernels, ws, scale, wm, wl, &wa, &b)
			softmaxBounded4AVX512(s, scale, m, l, alpha, &b)
			for r := range 4 {
				for j := range panel {
					if (j < int(b.lo[r]) || j >= int(b.hi[r])) && l[r] == l[r] && s[r*panel+j] != 0 {
						t.Fatalf("trial %d: weight [%d][%d] = %v outside bounds %v..%v, want 0", trial, r, j, s[r*panel+j], b.lo, b.hi)
					}
				}
			}
		} else {
			softmax4Go(ws, scale, wm, wl, &wa)
			softmax4AVX512(s, scale, m, l, alpha)
		}
		if msg := softmax4Mismatch(s, m, l, alpha, ws, wm, wl, wa[:], mOld); msg != "" {
			t.Fatalf("trial %d: %s", trial, msg)
		}
		if err := sOK(); err != nil {
			t.Fatal(err)
		}
	}
}

// amxOperands builds random A rows (16 × 32ks floats) and a B operand of
// ks k steps × 64 columns, both split, with the float32 values kept.
func amxOperands(rng *rand.Rand, ks int) (a []float32, ap []uint16, b []float32, bp []uint16) {
	k := 32 * ks
	a = make([]float32, amxRows*k)
	b = make([]float32, k*64) // b[kk*64+n]
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range b {
		b[i] = float32(rng.NormFloat64())
	}
	ap = make([]uint16, 3*amxRows*k)
	amxSplitRowsGo(ap, amxRows*k, k, a, k, amxRows, ks)
	// B tiles: k step s, n tile t at (4s+t)·512; row p = k pair (2p, 2p+1).
	part := ks * 4 * amxTile
	bp = make([]uint16, 3*part)
	for s := range ks {
		amxSplitPairsGo(bp[s*4*amxTile:], part, amxTile, 32, b[32*s*64:], 2*64, 64, 16, 4)
	}
	return a, ap, b, bp
}

// amxGemmError returns the largest error of c against the float64 product
// of a and b, in units of 2^-24 times the sum of the magnitudes of each
// entry's products.
func amxGemmError(c, a, b []float32, ks int) float64 {
	k := 32 * ks
	worst := 0.0
	for r := range amxRows {
		for n := range 64 {
			var exact, mag float64
			for kk := range k {
				p := float64(a[r*k+kk]) * float64(b[kk*64+n])
				exact += p
				mag += math.Abs(p)
			}
			worst = max(worst, math.Abs(float64(c[r*64+n])-exact)/(mag*0x1p-24))
		}
	}
	return worst
}

// TestAMXGemm6 holds the six-product tile sum to float32 accuracy against
// the float64 product of the unsplit inputs: within 2(k+8) roundings of
// 2^-24 of the products' magnitudes (k sums in float32, plus the parts
// left out, below 8 such units: 2^-21 of each product). A five-product variant (h·m left out, an error
// near 2^-8 relative) must fail the same bound. On CPUs with AMX the tile
// instructions are held to it too.
func TestAMXGemm6(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 14))
	for _, ks := range []int{1, 2, 4, 8} {
		a, ap, b, bp := amxOperands(rng, ks)
		bound := 2 * float64(32*ks+8)
		c := make([]float32, amxRows*64)
		amxGemm6Go(c, 64, ap, 32*ks, amxRows*32*ks, bp, ks*4*amxTile, 4*amxTile, ks)
		if e := amxGemmError(c, a, b, ks); e > bound {
			t.Errorf("Go tile products, k %d: error %.1f units, bound %.0f", 32*ks, e, bound)
		}
		// The broken variant: part m of B zeroed drops h·m and m·m.
		broken := append([]uint16(nil), bp...)
		clear(broken[ks*4*amxTile : 2*ks*4*amxTile])
		amxGemm6Go(c, 64, ap, 32*ks, amxRows*32*ks, broken, ks*4*amxTile, 4*amxTile, ks)
		if e := amxGemmError(c, a, b, ks); e <= bound {
			t.Errorf("broken tile products (B's middle part dropped), k %d: error %.1f units passes the bound %.0f", 32*ks, e, bound)
		}
		if !hasAMX() {
			continue
		}
		amxGemm6Asm(c, 64, ap, 32*ks, amxRows*32*ks, bp, ks*4*amxTile, 4*amxTile, ks)
		if e := amxGemmError(c, a, b, ks); e > bound {
			t.Errorf("AMX tile products, k %d: error %.1f units, bound %.0f", 32*ks, e, bound)
		}
	}
	if !hasAMX() {
		t.Log("no AMX on this CPU (or not granted): only the Go tile products were checked")
	}
}

// BenchmarkAMX times the AMX step and its parts on one 16-row group and one
// key panel at D 64: the tile products of Q·Kᵀ at 1, 2 and 8 k steps (the
// slope is the products' cost, the intercept the configuration, stores
// and release), the configuration alone, the softmax of 16 rows, the
// weights' split, the update, and the whole step.
func BenchmarkAMX(b *testing.B) {
	if !hasAMX() {
		b.Skip("no AMX")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const d = 64
	for _, ks := range []int{1, 2, 8} {
		_, ap, _, bp := amxOperands(rng, ks)
		c := make([]float32, amxRows*64)
		b.Run(fmt.Sprintf("gemm/ks=%d", ks), func(b *testing.B) {
			for b.Loop() {
				amxGemm6Asm(c, 64, ap, 32*ks, amxRows*32*ks, bp, ks*4*amxTile, 4*amxTile, ks)
			}
			b.ReportMetric(float64(6*4*ks*amxRows*16*32*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
	b.Run("config", func(b *testing.B) {
		for b.Loop() {
			amxConfigRelease()
		}
	})
	s := make([]float32, amxRows*panel)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	m, l, alpha := make([]float32, amxRows), make([]float32, amxRows), make([]float32, amxRows+4)
	b.Run("softmax16", func(b *testing.B) {
		for b.Loop() {
			for r := 0; r < amxRows; r += 4 {
				copy(m[r:r+4], []float32{9, 9, 9, 9})
				softmax4AVX512(s[r*panel:], 1, m[r:], l[r:], alpha[r:])
			}
		}
	})
	pa := make([]uint16, 3*amxRows*panel)
	b.Run("splitP", func(b *testing.B) {
		for b.Loop() {
			amxSplitRowsAsm(pa, amxRows*panel, panel, s, panel, amxRows, panel/32)
		}
	})
	acc, t := make([]float32, amxRows*d), make([]float32, amxRows*d)
	b.Run("update", func(b *testing.B) {
		for b.Loop() {
			amxUpdateAsm(acc, t, d, alpha, amxRows)
		}
	})
	b.Run("step", func(b *testing.B) {
		c, sc, kB, vB := amxTestGroup(rng, 1, normalValues(rng, 1), normalValues(rng, 1), normalValues(rng, 1))
		mm, ll, aa := make([]float32, amxRows), make([]float32, amxRows), make([]float32, amxRows*d)
		for b.Loop() {
			for r := range mm {
				mm[r] = 30
			}
			c.amxStep(sc, 0, sc.qa, kB, vB, 0.125, mm, ll, aa, nil)
		}
		b.ReportMetric(float64(4*amxRows*panel*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("attend64/4panels", func(b *testing.B) {
		_, sc, kB, vB := amxTestGroup(rng, 4, normalValues(rng, 1), normalValues(rng, 1), normalValues(rng, 1))
		mm, ll, aa := make([]float32, amxRows), make([]float32, amxRows), make([]float32, amxRows*d)
		g := &amxGroup{qa: sc.qa, kB: kB, vB: vB, panels: 4, s: sc.s16, pa: sc.pa, t: sc.t, m: mm, l: ll, alpha: sc.alpha16[:], acc: aa, scale: 0.125}
		for b.Loop() {
			for r := range mm {
				mm[r] = 30
			}
			amxAttend64Asm(g)
		}
		b.ReportMetric(float64(4*4*amxRows*panel*d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("pack", func(b *testing.B) {
		kB, vB := make([]uint16, amxPanelSize(d)), make([]uint16, amxPanelSize(d))
		kt, v := make([]float32, d*panel), make([]float32, panel*d)
		for b.Loop() {
			amxKernels.packAMXPanel(kB, vB, kt, v, d, false)
		}
	})
}

// TestAMXAttend64 holds the fused assembly to amxStep panel by panel on
// the same tile products: the same running maxima, sums and outputs bit for
// bit, on runs of one to five panels, the rows masked to key bounds or not
// (AMX CPUs only).
func TestAMXAttend64(t *testing.T) {
	if !hasAMX() {
		t.Skip("no AMX on this CPU (or not granted)")
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
	const d = 64
	for trial := 0; trial < 80; trial++ {
		// Half the trials have E4M3 values, exact in bfloat16, and run the
		// fused form with exact set on operands split as exact ones are (h
		// alone, the other parts NaN patterns): it leaves out the products
		// of the zero parts, and must still equal amxStep's six, on the
		// full split, bit for bit.
		exact := trial%2 == 1
		run, scale := 1+trial%5, float32(0.125)
		q, k, v := normalValues(rng, 1), normalValues(rng, 2), normalValues(rng, 1)
		if exact {
			scale, q, k, v = 2e-5, e4m3Values(rng), e4m3Values(rng), e4m3Values(rng)
		}
		c, sc, ops := amxTestOperands(rng, run, q, k, v)
		kB, vB := ops[1], ops[2]
		sz := amxPanelSize(d)
		m, l, acc := make([]float32, amxRows), make([]float32, amxRows), make([]float32, amxRows*d)
		for r := range m {
			m[r] = float32(math.Inf(-1))
		}
		wm, wl, wacc := append([]float32(nil), m...), append([]float32(nil), l...), append([]float32(nil), acc...)
		// Trials 4 and up in each ten mask the rows to key bounds in each
		// panel (amxGroup.bounds), every row seeing a key of each.
		var bounds []rowBounds
		if trial%10 >= 4 {
			bounds = make([]rowBounds, 4*run)
			for i := range bounds {
				for r := range 4 {
					lo := rng.IntN(panel)
					bounds[i].lo[r], bounds[i].hi[r] = int32(lo), int32(lo+1+rng.IntN(panel-lo))
				}
			}
		}
		for i := range run {
			var b []rowBounds
			if bounds != nil {
				b = bounds[4*i : 4*i+4]
			}
			c.amxStep(sc, 0, sc.qa, kB[i*sz:(i+1)*sz], vB[i*sz:(i+1)*sz], scale, wm, wl, wacc, b)
		}
		g := amxGroup{qa: sc.qa, kB: kB, vB: vB, panels: run, s: sc.s16, pa: sc.pa, t: sc.t,
			m: m, l: l, alpha: sc.alpha16[:], acc: acc, scale: scale, exact: exact, bounds: bounds}
		if exact { // the operands split as exact ones are: h alone
			g.qa, g.kB, g.vB = ops[3], ops[4], ops[5]
		}
		amxAttend64Asm(&g)
		for r := range m {
			if m[r] != wm[r] || l[r] != wl[r] {
				t.Fatalf("trial %d (%d panels, exact %v) row %d: m %v l %v, step by step %v %v", trial, run, exact, r, m[r], l[r], wm[r], wl[r])
			}
		}
		for i := range acc {
			if acc[i] != wacc[i] {
				t.Fatalf("trial %d (%d panels, exact %v): acc[%d] = %v, step by step %v", trial, run, exact, i, acc[i], wacc[i])
			}
		}
	}
}

// normalValues returns a generator of normal values times sigma.
func normalValues(rng *rand.Rand, sigma float64) func(int) float32 {
	return func(int) float32 { return float32(rng.NormFloat64() * sigma) }
}

// amxTestGroup returns a call and scratch on the AMX set at D 64 with one
// group of 16 query rows from qv split into sc.qa, and the packed operands
// of panels key panels (keys from kv, values from vv), one after another.
func amxTestGroup(rng *rand.Rand, panels int, qv, kv, vv func(int) float32) (*call, *scratch, []uint16, []uint16) {
	c, sc, ops := amxTestOperands(rng, panels, qv, kv, vv)
	return c, sc, ops[1], ops[2]
}

// amxTestOperands is amxTestGroup, the operands in ops[0:3] (query parts,
// K, V) as they are split for every problem, and in ops[3:6] as for exact
// operands: h alone, every other part filled with a NaN pattern that no
// result may show.
func amxTestOperands(rng *rand.Rand, panels int, qv, kv, vv func(int) float32) (*call, *scratch, [6][]uint16) {
	const d = 64
	c := &call{ks: &amxKernels, d: d, bq: 64, amxOn: true}
	sc := c.getScratch()
	q := make([]float32, amxRows*d)
	for i := range q {
		q[i] = qv(i)
	}
	sz := amxPanelSize(d)
	var ops [6][]uint16
	ops[0], ops[1], ops[2] = sc.qa, make([]uint16, panels*sz), make([]uint16, panels*sz)
	ops[3], ops[4], ops[5] = make([]uint16, len(sc.qa)), make([]uint16, panels*sz), make([]uint16, panels*sz)
	for _, o := range ops[3:] {
		for i := range o {
			o[i] = 0x7fa5
		}
	}
	amxSplitRowsAsm(ops[0], amxRows*d, d, q, d, amxRows, d/32)
	amxSplitRowsAsm(ops[3], 0, d, q, d, amxRows, d/32)
	for i := range panels {
		kt, v := make([]float32, d*panel), make([]float32, panel*d)
		for j := range kt {
			kt[j], v[j] = kv(j), vv(j)
		}
		amxKernels.packAMXPanel(ops[1][i*sz:], ops[2][i*sz:], kt, v, d, false)
		amxKernels.packAMXPanel(ops[4][i*sz:], ops[5][i*sz:], kt, v, d, true)
	}
	return c, sc, ops
}

// BenchmarkAMXClock asks whether tile work slows the vector units after it
// (a lower clock while the tile unit is busy would): each iteration runs a
// burst of about 10 µs, tile products (amx) or the AVX-512 softmax (avx512),
// then the AVX-512 FMA peak loop, timed alone. It reports the peak loop's
// rate after each kind of burst.
func BenchmarkAMXClock(b *testing.B) {
	if !hasAMX() {
		b.Skip("no AMX")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	_, ap, _, bp := amxOperands(rng, 2)
	c := make([]float32, amxRows*64)
	s := make([]float32, amxRows*panel)
	m, l, alpha := make([]float32, amxRows), make([]float32, amxRows), make([]float32, amxRows+4)
	bursts := map[string]func(){
		"amx": func() {
			for range 20 {
				amxGemm6Asm(c, 64, ap, 64, amxRows*64, bp, 2*4*amxTile, 4*amxTile, 2)
			}
		},
		"avx512": func() {
			for range 28 {
				for r := 0; r < amxRows; r += 4 {
					copy(m[r:r+4], []float32{9, 9, 9, 9})
					softmax4AVX512(s[r*panel:], 1, m[r:], l[r:], alpha[r:])
				}
			}
		},
	}
	for _, name := range []string{"avx512", "amx"} {
		burst := bursts[name]
		b.Run("after-"+name, func(b *testing.B) {
			var peak time.Duration
			flops := 0.0
			for b.Loop() {
				burst()
				t0 := time.Now()
				flops += fmaPeak("avx512", 1<<11)
				peak += time.Since(t0)
			}
			b.ReportMetric(flops/peak.Seconds()/1e9, "peak-GFLOP/s")
		})
	}
}
