// Package fp8 is a bit-faithful emulator of the 8-bit floating-point formats
// E4M3 (the "fn" variant: no infinities, one NaN pattern per sign) and E5M2
// (IEEE-like, with infinities and NaNs).
//
// Conversions from float32 round to nearest, ties to even, subnormals
// included, and treat overflow and NaN as the chosen Mode says. The three
// modes reproduce, bit for bit, CUDA's cuda_fp8.h conversion
// __nv_cvt_float_to_fp8 with __NV_SATFINITE and __NV_NOSAT, and PyTorch's
// Tensor.to(torch.float8_e4m3fn / torch.float8_e5m2). The tables in
// testdata/fp8 were generated on an NVIDIA GPU from those very functions and
// the tests hold this package to them.
package fp8

import "math"

// E4M3 is an FP8 value with 1 sign bit, 4 exponent bits (bias 7) and 3
// mantissa bits. It has no infinities; 0x7F and 0xFF are NaN, and the
// largest finite magnitude is 448.
type E4M3 uint8

// E5M2 is an FP8 value with 1 sign bit, 5 exponent bits (bias 15) and 2
// mantissa bits. 0x7C and 0xFC are ±Inf, 0x7D-0x7F and 0xFD-0xFF are NaN,
// and the largest finite magnitude is 57344.
type E5M2 uint8

// Mode selects how a conversion treats values beyond the format's range and
// NaN inputs. Finite values in range always round to nearest even.
type Mode int

const (
	// SatFinite is CUDA's __NV_SATFINITE: magnitudes that round beyond the
	// largest finite value, and ±Inf, clamp to ±max finite; every NaN
	// becomes 0x7F.
	SatFinite Mode = iota
	// NoSat is CUDA's __NV_NOSAT: overflow gives NaN with the input's sign
	// (E4M3) or ±Inf (E5M2); every NaN becomes 0x7F.
	NoSat
	// Torch is PyTorch's cast (the same as ml_dtypes): like NoSat, but a NaN
	// input keeps its sign (0x7F or 0xFF).
	Torch
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case SatFinite:
		return "satfinite"
	case NoSat:
		return "nosat"
	case Torch:
		return "torch"
	}
	return "Mode(invalid)"
}

// Largest finite magnitudes.
const (
	MaxE4M3 = 448.0
	MaxE5M2 = 57344.0
)

// format describes one FP8 encoding for the shared bit-level converter.
type format struct {
	mantBits  uint   // explicit mantissa bits
	bias      int32  // exponent bias
	maxFinite uint8  // code of the largest finite magnitude
	overflow  uint8  // code that NoSat and Torch give on overflow (NaN or Inf)
	firstOver uint32 // smallest float32 magnitude (bits) that rounds past maxFinite
}

var (
	// 464 = 448 + half an ulp; it ties to the even 448, so only larger
	// magnitudes overflow.
	e4m3Format = format{mantBits: 3, bias: 7, maxFinite: 0x7E, overflow: 0x7F, firstOver: math.Float32bits(464) + 1}
	// 61440 = 57344 + half an ulp; it ties to the even 65536, i.e. Inf.
	e5m2Format = format{mantBits: 2, bias: 15, maxFinite: 0x7B, overflow: 0x7C, firstOver: math.Float32bits(61440)}
)

// convert is the bit-level float32 -> FP8 conversion shared by both formats.
func (f *format) convert(x float32, m Mode) uint8 {
	bits := math.Float32bits(x)
	sign := uint8(bits>>24) & 0x80
	abs := bits & 0x7FFFFFFF
	switch {
	case abs > 0x7F800000: // NaN
		if m == Torch {
			return 0x7F | sign
		}
		return 0x7F
	case abs >= f.firstOver: // overflow, ±Inf included
		if m == SatFinite {
			return f.maxFinite | sign
		}
		return f.overflow | sign
	}
	shift := 23 - f.mantBits
	exp := int32(abs>>23) - 127
	if exp >= 1-f.bias { // normal result (rounding may carry into the exponent)
		r := abs + (1<<(shift-1) - 1) + (abs>>shift)&1
		return uint8((r>>shift)-uint32(127-f.bias)<<f.mantBits) | sign
	}
	// Subnormal result: shift the full significand down to the FP8 quantum.
	shift += uint(1 - f.bias - exp)
	if shift > 25 || abs < 0x00800000 { // below half the smallest subnormal
		return sign
	}
	mant := abs&0x007FFFFF | 0x00800000
	r := (mant + (1<<(shift-1) - 1) + (mant>>shift)&1) >> shift
	return uint8(r) | sign
}

// ToE4M3 converts x to E4M3, rounding to nearest even, with overflow and NaN
// handled as m says (a mode other than SatFinite and Torch as NoSat: the
// bulk conversions refuse unknown modes).
func ToE4M3(x float32, m Mode) E4M3 { return E4M3(e4m3Format.convert(x, m)) }

// ToE5M2 converts x to E5M2, rounding to nearest even, with overflow and NaN
// handled as m says (a mode other than SatFinite and Torch as NoSat: the
// bulk conversions refuse unknown modes).
func ToE5M2(x float32, m Mode) E5M2 { return E5M2(e5m2Format.convert(x, m)) }

// Float32 returns the exact value of v (every E4M3 value is a float32).
func (v E4M3) Float32() float32 { return e4m3Table[v] }

// Float32 returns the exact value of v (every E5M2 value is a float32).
func (v E5M2) Float32() float32 { return e5m2Table[v] }

// IsNaN reports whether v is a NaN pattern (0x7F or 0xFF).
func (v E4M3) IsNaN() bool { return v&0x7F == 0x7F }

// IsNaN reports whether v is a NaN pattern.
func (v E5M2) IsNaN() bool { return v&0x7F > 0x7C }

var (
	e4m3Table = decodeTable(3, 7, false)
	e5m2Table = decodeTable(2, 15, true)
)

// E4M3Table returns the 256-entry decode table (index: the code). The
// returned array is a copy.
func E4M3Table() [256]float32 { return e4m3Table }

// E5M2Table returns the 256-entry decode table (index: the code). The
// returned array is a copy.
func E5M2Table() [256]float32 { return e5m2Table }

// decodeTable builds the code -> float32 table for a format by assembling
// float32 bit patterns.
func decodeTable(mantBits uint, bias int32, ieee bool) [256]float32 {
	var t [256]float32
	expMax := uint32(1)<<(7-mantBits) - 1
	for c := 0; c < 256; c++ {
		code := uint32(c)
		sign := (code & 0x80) << 24
		exp := (code >> mantBits) & expMax
		mant := code & (1<<mantBits - 1)
		var bits uint32
		switch {
		case ieee && exp == expMax && mant == 0:
			bits = 0x7F800000
		case ieee && exp == expMax, !ieee && exp == expMax && mant == 1<<mantBits-1:
			bits = 0x7FC00000
		case exp == 0 && mant == 0:
			bits = 0
		case exp == 0: // subnormal: normalise
			e := int32(1) - bias
			for mant&(1<<mantBits) == 0 {
				mant <<= 1
				e--
			}
			mant &^= 1 << mantBits
			bits = uint32(e+127)<<23 | mant<<(23-mantBits)
		default:
			bits = uint32(int32(exp)-bias+127)<<23 | mant<<(23-mantBits)
		}
		t[c] = math.Float32frombits(bits | sign)
	}
	return t
}
