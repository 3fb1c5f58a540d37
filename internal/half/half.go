// Package half converts between float32 and IEEE 754 binary16 (float16),
// the form in which the cuda backend brings the output of a call on host
// slices down: half the bytes of float32 over the bus, scaled by a power
// of two so that every output lies well inside float16's range.
//
// ToFloat32 and Decode are exact; FromFloat32 rounds to nearest, ties to
// even, as the GPU's __float2half_rn does. Decode runs the F16C
// instruction VCVTPH2PS on amd64 CPUs that have it and NEON's FCVTL on
// arm64 (the purego tag leaves both out); its Go loop is decodeGo.
package half

import (
	"encoding/binary"
	"math"

	"github.com/fp8attn/fp8attn/fp8"
)

// Bound is the largest magnitude Scale lets a scaled output reach: 2^15,
// half float16's largest finite 65504. The outputs are weighted means of
// V's rows (the kernels divide by the sum of the weights they multiplied,
// or by a float32 sum within a few float16 roundings of it), so the
// factor of two left covers the tensor cores' truncations and every
// rounding of the weights.
const Bound = 1 << 15

// ToFloat32 returns the value of the float16 with bits h, exactly. A NaN
// keeps its payload and comes out quiet, as VCVTPH2PS gives it.
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e, m := uint32(h>>10)&0x1f, uint32(h&0x3ff)
	switch {
	case e == 0x1f && m != 0:
		return math.Float32frombits(sign | 0x7fc00000 | m<<13)
	case e == 0x1f:
		return math.Float32frombits(sign | 0x7f800000)
	case e == 0: // zero or subnormal: m·2^-24
		v := float32(m) * 0x1p-24
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}

// FromFloat32 returns the bits of the float16 nearest f, ties to even;
// past 65504 (from 65520 on) ±Inf, a NaN a quiet NaN with the top ten
// bits of its payload.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp, man := int(b>>23)&0xff, b&0x7fffff
	switch {
	case exp == 0xff && man != 0:
		return sign | 0x7e00 | uint16(man>>13)
	case exp == 0xff:
		return sign | 0x7c00
	case exp == 0: // zero, or a float32 subnormal: below float16's half ulp
		return sign
	}
	// f = m·2^(e-23); float16's ulp at f is 2^max(e-10, -24), so the low
	// shift bits of m go, rounded to nearest even.
	e, m := exp-127, man|0x800000
	shift := max(13, -1-e)
	if shift > 24 { // below 2^-25, half the smallest subnormal: 0
		return sign
	}
	q, r, halfway := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
	if r > halfway || r == halfway && q&1 == 1 {
		q++
	}
	if shift > 13 { // subnormal (q = 1024 is the smallest normal's bits)
		return sign | uint16(q)
	}
	bits := uint32(e+15)<<10 + q - 1024 // q = 2048 carries into the exponent
	if bits >= 0x7c00 {
		return sign | 0x7c00
	}
	return sign | uint16(bits)
}

// Round returns x as the cuda backend's float16 output gives it back:
// x·factor rounded to float16, times unit (Scale's pair).
func Round(x, factor, unit float32) float32 {
	return ToFloat32(FromFloat32(x*factor)) * unit
}

// RoundOutput rounds out in place as a host-slice call on the cuda backend
// brings an output with V scales vScales down: Round at Scale(vScales).
func RoundOutput(out, vScales []float32) {
	factor, unit := Scale(vScales)
	for i, x := range out {
		out[i] = Round(x, factor, unit)
	}
}

// Scale returns the power of two factor by which outputs bounded by
// 448·max(vScales) (weighted means of E4M3 values, every code at most
// 448 in magnitude, times their scales) are multiplied before they are
// rounded to float16, so that they stay at or below Bound, and unit =
// 1/factor, exactly. Scales that are not finite are left out; with none
// left, or all 0, factor and unit are 1. factor is at most 2^127 (unit
// then a float32 subnormal, still exact) and at least 2^-122 (448 times
// the largest float32 is below 2^137). One factor serves the whole call:
// a head whose V is 2^28 times smaller than the largest head's lands in
// float16's subnormals.
func Scale(vScales []float32) (factor, unit float32) {
	m := 0.0
	for _, s := range vScales {
		if x := math.Abs(float64(s)); x > m && !math.IsInf(x, 0) {
			m = x
		}
	}
	if m == 0 {
		return 1, 1
	}
	_, e := math.Frexp(fp8.MaxE4M3 * m) // 448·m < 2^e
	k := min(15-e, 127)
	return float32(math.Ldexp(1, k)), float32(math.Ldexp(1, -k))
}

// Decode sets dst[i] to the float16 in src[2i:2i+2] (little-endian) times
// unit: ToFloat32's value, one float32 rounding; for i below the shorter
// of len(dst) and len(src)/2.
func Decode(dst []float32, src []byte, unit float32) {
	dst = dst[:min(len(dst), len(src)/2)]
	n := decodeVector(dst, src, unit)
	decodeGo(dst[n:], src[2*n:], unit)
}

// decodeGo is Decode's Go loop. A finite float16's bits, its exponent
// and fraction moved up 13 places beside its sign, are a float32 of its
// value times 2^-112 (a float32 subnormal where the float16 is one), so
// one product by k = 2^112·unit gives ToFloat32(h)·unit, rounded once (k
// is exact for every finite unit below 2^16 in magnitude, and the product
// by 2^112 would be exact); from 2^16 on, where k would overflow, each
// value takes ToFloat32 and the product by unit. Inf and NaN take
// ToFloat32.
func decodeGo(dst []float32, src []byte, unit float32) {
	src = src[:2*len(dst)]
	if u := math.Abs(float64(unit)); u >= 0x1p16 || math.IsNaN(u) {
		for i := range dst {
			dst[i] = ToFloat32(binary.LittleEndian.Uint16(src[2*i:])) * unit
		}
		return
	}
	k := unit * 0x1p112
	for i := range dst {
		h := uint32(binary.LittleEndian.Uint16(src[2*i:]))
		if h&0x7c00 == 0x7c00 {
			dst[i] = ToFloat32(uint16(h)) * unit
			continue
		}
		dst[i] = math.Float32frombits((h&0x8000)<<16|(h&0x7fff)<<13) * k
	}
}
