package half

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

// value is the exact value of float16 bits h (finite), from the format's
// definition: (-1)^s · 2^(e-15) · (1 + m/1024), or 2^-14 · m/1024 for e = 0.
func value(h uint16) float64 {
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	v := math.Ldexp(1+m/1024, e-15)
	if e == 0 {
		v = math.Ldexp(m/1024, -14)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// TestToFloat32Every: each of the 65536 float16 values converts exactly;
// ±Inf to ±Inf, a NaN to a quiet NaN of the same sign and payload.
func TestToFloat32Every(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got := ToFloat32(h)
		switch e, m := h>>10&0x1f, h&0x3ff; {
		case e == 0x1f && m != 0:
			want := uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(m)<<13
			if math.Float32bits(got) != want {
				t.Fatalf("NaN %#04x: %#08x, want %#08x", h, math.Float32bits(got), want)
			}
		case e == 0x1f:
			if !math.IsInf(float64(got), 1-2*int(h>>15)) {
				t.Fatalf("Inf %#04x: %g", h, got)
			}
		default:
			if float64(got) != value(h) || math.Signbit(float64(got)) != (h&0x8000 != 0) {
				t.Fatalf("%#04x: %g, want %g", h, got, value(h))
			}
		}
	}
}

// nearest is the float16 nearest x by the definition: the finite values
// on either side of x (exact rationals), the nearer one, a tie to the even
// one; past 65504 by half an ulp or more, Inf.
func nearest(x float32) uint16 {
	if math.IsNaN(float64(x)) {
		panic("NaN")
	}
	sign := uint16(0)
	if math.Signbit(float64(x)) {
		sign, x = 0x8000, -x
	}
	if float64(x) >= 65520 {
		return sign | 0x7c00
	}
	// The largest h with value(h) <= x, by bisection over 0..0x7bff.
	lo, hi := uint16(0), uint16(0x7bff)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if value(mid) <= float64(x) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if value(lo) == float64(x) || lo == 0x7bff {
		return sign | lo
	}
	a, b, v := new(big.Float).SetFloat64(value(lo)), new(big.Float).SetFloat64(value(lo+1)), new(big.Float).SetFloat64(float64(x))
	da, db := new(big.Float).Sub(v, a), new(big.Float).Sub(b, v)
	switch c := da.Cmp(db); {
	case c < 0, c == 0 && lo&1 == 0:
		return sign | lo
	}
	return sign | (lo + 1)
}

// TestFromFloat32: every float16 comes back to its own bits; float32
// values around every float16 (the midpoints and their float32
// neighbours) and random ones of every exponent round to the nearest
// float16, ties to even, as the definition gives it; NaN stays NaN, ±Inf
// and values from 65520 on become ±Inf, float32 subnormals ±0.
func TestFromFloat32(t *testing.T) {
	s := seed.Get()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", s)
	rng := rand.New(rand.NewPCG(s, 16))
	check := func(x float32) {
		t.Helper()
		if got, want := FromFloat32(x), nearest(x); got != want {
			t.Fatalf("%g (%#08x): %#04x, want %#04x", x, math.Float32bits(x), got, want)
		}
	}
	for i := range 0x7c00 {
		h := uint16(i)
		for _, sh := range []uint16{0, 0x8000} {
			if got := FromFloat32(ToFloat32(h | sh)); got != h|sh {
				t.Fatalf("%#04x round trip: %#04x", h|sh, got)
			}
		}
		mid := float32((value(h) + value(h+1)) / 2) // exact: 12 bits
		for _, x := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(x)
			check(-x)
		}
	}
	for range 1 << 18 {
		x := math.Float32frombits(rng.Uint32())
		if e := math.Float32bits(x) >> 23 & 0xff; e == 0xff {
			continue
		}
		if math.Abs(float64(x)) > 1e6 || math.Abs(float64(x)) < 1e-9 {
			x = float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(50)-30)) // most draws fall outside float16's range
		}
		check(x)
	}
	for _, c := range []struct {
		x    float32
		want uint16
	}{
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00}, {65519.996, 0x7bff}, {65520, 0x7c00},
		{math.Float32frombits(1), 0}, {-math.Float32frombits(1), 0x8000}, {0x1p-25, 0}, {math.Nextafter32(0x1p-25, 1), 1},
		{0x1p-24 * 1.5, 2}, {0x1p-24 * 2.5, 2},
	} {
		if got := FromFloat32(c.x); got != c.want {
			t.Errorf("%g: %#04x, want %#04x", c.x, got, c.want)
		}
	}
	if h := FromFloat32(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN: %#04x", h)
	}
}

// TestDecode: Decode (the F16C or NEON kernel where the CPU has it) equals
// decodeGo bit for bit, and each element ToFloat32's value times unit, on
// all 65536 float16 values at units of every kind (1, powers of two large
// and small, not a power of two), at every length up to 70 and offsets
// that leave the kernel unaligned; nothing past dst's end is written.
func TestDecode(t *testing.T) {
	t.Logf("vector kernel (F16C, NEON): %v", decodeVector(make([]float32, 8), make([]byte, 16), 1) == 8)
	src := make([]byte, 2<<16)
	for i := range 1 << 16 {
		src[2*i], src[2*i+1] = byte(i), byte(i>>8)
	}
	for _, unit := range []float32{1, 0x1p-20, 0x1p100, 0x1p-127, 3, -0.75, 0x1p-14, 0x1p-15, 0x1p15, 0x1p15 * 1.9999999, 0x1p16, -0x1p16, 0x1p-149} {
		got, want := make([]float32, 1<<16), make([]float32, 1<<16)
		Decode(got, src, unit)
		decodeGo(want, src, unit)
		for i := range got {
			h := uint16(i)
			w := ToFloat32(h) * unit
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) || !same(want[i], w) {
				t.Fatalf("unit %g, %#04x: %#08x, Go loop %#08x, want %g", unit, h, math.Float32bits(got[i]), math.Float32bits(want[i]), w)
			}
		}
	}
	for n := range 71 {
		for off := range 3 {
			dst := make([]float32, n+off+1)
			for i := range dst {
				dst[i] = -1
			}
			Decode(dst[off:off+n], src[2*(1000+off):2*(1000+off+n)], 0.5)
			for i, x := range dst {
				want := float32(-1)
				if i >= off && i < off+n {
					want = ToFloat32(uint16(1000+i)) * 0.5
				}
				if x != want {
					t.Fatalf("n %d offset %d: dst[%d] %g, want %g", n, off, i, x, want)
				}
			}
		}
	}
}

// same: equal bits, or both NaN.
func same(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// TestScaleAndRound: Scale's factor is the largest power of two that keeps
// 448·max|scale| at or below Bound (unit its reciprocal, exact), leaving
// out scales that are not finite; Round of every such output is within
// float16's half ulp of it (relative 2^-11 at most, far below an E4M3
// input's 2^-4), and the bound itself survives.
func TestScaleAndRound(t *testing.T) {
	for _, c := range []struct {
		scales []float32
		factor float32
	}{
		{nil, 1}, {[]float32{0, 0}, 1}, {[]float32{1}, 64}, // 448·64 = 28672 <= 2^15 < 448·128
		{[]float32{0.001, -0.5, 0.25}, 128}, {[]float32{float32(math.Inf(1)), 1}, 64}, {[]float32{float32(math.NaN()), 2}, 32},
		{[]float32{1e30}, 0x1p-94}, {[]float32{1e-40}, 0x1p127}, {[]float32{3e38}, 0x1p-122},
	} {
		f, u := Scale(c.scales)
		if f != c.factor || f*u != 1 {
			t.Errorf("%v: factor %g unit %g, want factor %g", c.scales, f, u, c.factor)
		}
	}
	s := seed.Get()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", s)
	rng := rand.New(rand.NewPCG(s, 17))
	for range 1 << 16 {
		scale := float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(60)-30))
		f, u := Scale([]float32{scale})
		bound := 448 * float64(scale)
		if bound*float64(f) > Bound || 2*bound*float64(f) <= Bound {
			t.Fatalf("scale %g: factor %g", scale, f)
		}
		x := float32((rng.Float64()*2 - 1) * bound)
		if rng.IntN(8) == 0 {
			x = float32(bound) * (1 + 1.0/16) // past the bound: weights rounded apart from their sum
		}
		r := Round(x, f, u)
		if d := math.Abs(float64(r) - float64(x)); d > math.Abs(float64(x))*0x1p-11+0x1p-25*float64(u) || math.IsInf(float64(r), 0) {
			t.Fatalf("scale %g: %g rounds to %g", scale, x, r)
		}
	}
}

// TestRoundRMS: on outputs shaped as the kernels' (weighted means of 64
// values of N(0, 1) and of 2 + N(0, 1), log-normal weights), rounded at
// Scale of V's amax/448, the rounding's relative L2 error lies within
// round-to-nearest's bound, half a float16 ulp spread evenly: 2^-10/√12
// (a truncation would reach twice it). The log has the measured values,
// which docs/ACCURACY.md quotes.
func TestRoundRMS(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, off := range []float64{0, 2} {
		var num, den float64
		for range 20000 {
			v, w := make([]float64, 64), make([]float64, 64)
			amax, sw, o := 0.0, 0.0, 0.0
			for j := range v {
				v[j] = off + rng.NormFloat64()
				amax = max(amax, math.Abs(v[j]))
				w[j] = math.Exp(2 * rng.NormFloat64())
				sw += w[j]
			}
			for j := range v {
				o += w[j] / sw * v[j]
			}
			f, u := Scale([]float32{float32(amax / 448)})
			x := float32(o)
			d := float64(Round(x, f, u)) - float64(x)
			num += d * d
			den += float64(x) * float64(x)
		}
		rms := math.Sqrt(num / den)
		t.Logf("V = %g + N(0, 1): relative L2 of the rounding %.3g", off, rms)
		if !(rms <= 0x1p-10/math.Sqrt(12)) {
			t.Errorf("V = %g + N(0, 1): relative L2 %.3g beyond 2^-10/√12", off, rms)
		}
	}
}

// TestDecodeLengths: Decode converts the shorter of dst and src/2 and
// leaves the rest of dst alone (an odd last byte is no value).
func TestDecodeLengths(t *testing.T) {
	src := []byte{0x00, 0x3c, 0x00, 0x40, 0x00} // 1, 2, and a stray byte
	for _, c := range []struct {
		dst  int
		want []float32
	}{{0, []float32{}}, {1, []float32{1}}, {2, []float32{1, 2}}, {4, []float32{1, 2, -1, -1}}} {
		dst := make([]float32, c.dst)
		for i := range dst {
			dst[i] = -1
		}
		Decode(dst, src, 1)
		for i := range dst {
			if dst[i] != c.want[i] {
				t.Errorf("len(dst) %d: %v, want %v", c.dst, dst, c.want)
				break
			}
		}
	}
	Decode(nil, nil, 1)
}
