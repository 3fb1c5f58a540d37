//go:build !purego

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
	"golang.org/x/sys/cpu"
)

// pairSet returns the pair kernels' set, skipping tb where the CPU lacks
// AVX512_BF16.
func pairSet(tb testing.TB) *kernelSet {
	if !cpu.X86.HasAVX512BF16 || !cpu.X86.HasAVX512F {
		tb.Skip("no AVX512_BF16 on this CPU")
	}
	return &avx512BF16Kernels
}

// e4m3Values returns a function giving random E4M3 code values: a random
// code's value, never NaN.
func e4m3Values(rng *rand.Rand) func(int) float32 {
	return func(int) float32 {
		for {
			if v := fp8.E4M3(rng.IntN(256)); !v.IsNaN() {
				return v.Float32()
			}
		}
	}
}

// pairInputs returns rows query rows and a transposed key panel of d rows
// of E4M3 values (value), and both as ks's bfloat16 pairs.
func pairInputs(ks *kernelSet, value func(int) float32, rows, d int) (q, kt []float32, q16, kt16 []uint32) {
	q, kt = make([]float32, rows*d), make([]float32, d*panel)
	for i := range q {
		q[i] = value(i)
	}
	for i := range kt {
		kt[i] = value(i)
	}
	q16, kt16 = make([]uint32, rows*d/2), make([]uint32, d/2*panel)
	ks.pairs.rows(q16, q)
	ks.pairs.panel(kt16, kt, d)
	return q, kt, q16, kt16
}

// guardedWords is guarded for words: n words between guard regions, and a
// check that the guards are untouched.
func guardedWords(rng *rand.Rand, n int) ([]uint32, func() error) {
	const guard, poison = 29, 0xa5a5a5a5
	off := rng.IntN(8)
	buf := make([]uint32, off+n+2*guard)
	for i := range buf {
		buf[i] = poison
	}
	return buf[guard+off : guard+off+n : guard+off+n], func() error {
		for i, x := range buf {
			if (i < guard+off || i >= guard+off+n) && x != poison {
				return fmt.Errorf("guard word %d overwritten (slice at [%d, %d))", i, guard+off, guard+off+n)
			}
		}
		return nil
	}
}

// pairSpecials are floats the pair conversions must keep: E4M3 values
// (normal, subnormal, zeros), the decoder's NaN and NaNs whose payload
// lies only in the low half, which a plain truncation turns into Inf.
var pairSpecials = []uint32{0x00000000, 0x80000000, 0x43e00000, 0xc3e00000, 0x3b000000, 0xbb000000,
	0x7fc00000, 0xffc00000, 0x7f800001, 0xff80ffff, 0x7f800000, 0xff800000}

// TestPairConversions: the set's pair conversions write pairRowsGo's and
// pairPanelGo's words bit for bit, on random E4M3 values and specials,
// lengths that do and do not fill vectors and none, guard regions
// untouched; every pair holds its floats exactly, and a NaN stays a NaN.
func TestPairConversions(t *testing.T) {
	pk := pairSet(t).pairs
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 41))
	value := e4m3Values(rng)
	fill := func(i int) float32 {
		if rng.IntN(8) == 0 {
			return math.Float32frombits(pairSpecials[rng.IntN(len(pairSpecials))])
		}
		return value(i)
	}
	for trial := range 300 {
		n := 1 + rng.IntN(200)
		switch {
		case trial == 1:
			n = 0 // nothing to write, nothing read
		case trial%2 == 0:
			n = 8 * (1 + rng.IntN(40))
		}
		src, srcOK := guarded(rng, 2*n, fill)
		got, gotOK := guardedWords(rng, n)
		want := make([]uint32, n)
		pk.rows(got, src)
		pairRowsGo(want, src)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("rows n=%d: word %d = %#08x, want %#08x (floats %#08x %#08x)", n, i, got[i], want[i], math.Float32bits(src[2*i]), math.Float32bits(src[2*i+1]))
			}
			for h, x := range [2]float32{src[2*i], src[2*i+1]} {
				y := fromBF16(uint16(want[i] >> (16 * h)))
				if x == x && y != x || x != x && y == y {
					t.Fatalf("pairOf(%#08x, %#08x): half %d is %v, want %v", math.Float32bits(src[2*i]), math.Float32bits(src[2*i+1]), h, y, x)
				}
			}
		}
		for _, ok := range []func() error{srcOK, gotOK} {
			if err := ok(); err != nil {
				t.Fatalf("rows n=%d: %v", n, err)
			}
		}

		d := 2 * (1 + rng.IntN(64))
		kt, ktOK := guarded(rng, d*panel, fill)
		gotP, gotPOK := guardedWords(rng, d/2*panel)
		wantP := make([]uint32, d/2*panel)
		pk.panel(gotP, kt, d)
		pairPanelGo(wantP, kt, d)
		for i := range wantP {
			if gotP[i] != wantP[i] {
				t.Fatalf("panel d=%d: word %d = %#08x, want %#08x", d, i, gotP[i], wantP[i])
			}
		}
		for _, ok := range []func() error{ktOK, gotPOK} {
			if err := ok(); err != nil {
				t.Fatalf("panel d=%d: %v", d, err)
			}
		}
	}
}

// TestSteps4Pairs holds the set's pairKernels.steps4 to scores4PairsGo's
// dot products followed by the set's own softmax step and pv4, group by
// group, bit for bit (so VDPBF16PS sums as scores4PairsGo documents), and
// the pair dot products to the float32 ones within float32 summation
// error: random E4M3 rows, group counts and head dims, running maxima
// finite or -Inf, guard regions around every slice the steps write.
func TestSteps4Pairs(t *testing.T) {
	ks := pairSet(t)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 43))
	value := e4m3Values(rng)
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{16, 32, 64, 96, 128, 256}
	for range 200 {
		d, groups := dims[rng.IntN(len(dims))], 1+rng.IntN(16)
		rows := 4 * groups
		q, kt, q16, kt16 := pairInputs(ks, value, rows, d)
		v, vok := guarded(rng, panel*d, normal)
		got := newStepState(rng, rows, d, normal)
		want := got.clone()
		// Scale so that the scores (E4M3 products up to 448², d of them)
		// stay in the softmax's useful range.
		scale := float32(1 / (math.Sqrt(float64(d)) * 2000))
		var a, wa [8]float32
		dots := make([]float32, 4*panel)
		for g := range groups {
			r := 4 * g
			scores4PairsGo(want.s, q16[r*d/2:(r+4)*d/2], kt16, d)
			scores4Go(dots, q[r*d:(r+4)*d], kt, d, 1)
			for i, x := range want.s {
				mag := 0.0
				for k := range d {
					mag += math.Abs(float64(q[(r+i/panel)*d+k]) * float64(kt[k*panel+i%panel]))
				}
				if !close(x, dots[i], d, mag) {
					t.Fatalf("d=%d group %d: pair dot product %d = %v, float32 one %v", d, g, i, x, dots[i])
				}
			}
			softmax4AVX512(want.s, scale, want.m[r:r+4], want.l[r:r+4], wa[:])
			ks.pv4(want.acc[r*d:(r+4)*d], want.s, v, d, panel, (*[4]float32)(wa[:4]))
		}
		ks.pairs.steps4(got.s, q16, kt16, v, got.acc, d, scale, got.m, got.l, &a, groups, ahead{})
		if err := got.compare(want, vok); err != nil {
			t.Fatalf("d=%d groups=%d: %v", d, groups, err)
		}
	}
}

// TestStepsBounded4Pairs holds the set's pairKernels.stepsBounded4 to
// stepsBounded4Pairs (scores4PairsGo's dot products, then the bounded
// softcap, mask and softmax of softmaxBounded4AVX512, then pv4 on the
// group's keys) bit for bit: random E4M3 rows, group counts, head dims and bounds
// (testBounds: softcapped or not, the whole panel or part of it), guard
// regions around every slice the steps write.
func TestStepsBounded4Pairs(t *testing.T) {
	ks := pairSet(t)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 44))
	value := e4m3Values(rng)
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	dims := []int{16, 32, 64, 96, 128, 256}
	for trial := range 200 {
		d, groups := dims[rng.IntN(len(dims))], 1+rng.IntN(16)
		rows := 4 * groups
		_, _, q16, kt16 := pairInputs(ks, value, rows, d)
		v, vok := guarded(rng, panel*d, normal)
		got := newStepState(rng, rows, d, normal)
		want := got.clone()
		// Scores (E4M3 products up to 448², d of them) in the softmax's
		// and the softcap's useful range.
		scale := float32(1 / (math.Sqrt(float64(d)) * 2000))
		b := testBounds(rng, trial, groups)
		var a, wa [8]float32
		stepsBounded4Pairs(ks, want.s, q16, kt16, v, want.acc, d, scale, want.m, want.l, &wa, groups, append([]rowBounds(nil), b...))
		ks.pairs.stepsBounded4(got.s, q16, kt16, v, got.acc, d, scale, got.m, got.l, &a, groups, ahead{}, b)
		if err := got.compare(want, vok); err != nil {
			t.Fatalf("d=%d groups=%d bounds %v: %v", d, groups, b, err)
		}
	}
}

// stepsBounded4Pairs is the reference for pairKernels.stepsBounded4: for
// each group (under b[g], or b[0] for every group), scores4PairsGo's dot
// products of the whole panel, softmaxBounded4AVX512 on them (the bounded
// step's softcap, mask and softmax, BOUNDED4X64 and SOFTMAX4X64, which
// TestScoresSoftmaxBounded4 holds to softmax4BoundedGo in the float32
// kernel), and ks.pv4 on the group's keys [p0, p0+pn).
func stepsBounded4Pairs(ks *kernelSet, s []float32, q16, kt16 []uint32, v, acc []float32, d int, scale float32, m, l []float32, alpha *[8]float32, groups int, b []rowBounds) {
	for g := range groups {
		r, bg := 4*g, &b[0]
		if len(b) > 1 {
			bg = &b[g]
		}
		scores4PairsGo(s, q16[r*d/2:(r+4)*d/2], kt16, d)
		softmaxBounded4AVX512(s, scale, m[r:r+4], l[r:r+4], alpha[:], bg)
		ks.pv4(acc[r*d:(r+4)*d], s[bg.p0:], v[int(bg.p0)*d:], d, int(bg.pn), (*[4]float32)(alpha[:4]))
	}
}

// BenchmarkSteps4Pairs: the steps of 16 groups of four rows against one
// full panel at D 64, the dot products in float32 (steps4) and on pairs
// (pairKernels.steps4); GFLOP/s count both products, 4·D a score.
func BenchmarkSteps4Pairs(b *testing.B) {
	const d, groups = 64, 16
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512DQ {
		b.Skip("no AVX-512 on this CPU")
	}
	ks := &avx512Kernels
	rng := rand.New(rand.NewPCG(1, 2))
	value := e4m3Values(rng)
	q, kt, v := make([]float32, 4*groups*d), make([]float32, d*panel), make([]float32, panel*d)
	for _, x := range [][]float32{q, kt, v} {
		for i := range x {
			x[i] = value(i)
		}
	}
	s, acc := make([]float32, 4*panel), make([]float32, 4*groups*d)
	m, l := make([]float32, 4*groups), make([]float32, 4*groups)
	var a [8]float32
	flops := float64(4 * 4 * groups * panel * d)
	reset := func() {
		for i := range m {
			m[i], l[i] = 0, 1
		}
	}
	b.Run("float32", func(b *testing.B) {
		reset()
		for b.Loop() {
			ks.steps4(s, q, kt, v, acc, d, 1e-5, m, l, &a, groups, ahead{})
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	if !cpu.X86.HasAVX512BF16 {
		return
	}
	pk := avx512BF16Kernels.pairs
	q16, kt16 := make([]uint32, len(q)/2), make([]uint32, len(kt)/2)
	pk.rows(q16, q)
	pk.panel(kt16, kt, d)
	b.Run("pairs", func(b *testing.B) {
		reset()
		for b.Loop() {
			pk.steps4(s, q16, kt16, v, acc, d, 1e-5, m, l, &a, groups, ahead{})
		}
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
