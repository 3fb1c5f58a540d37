package fp8

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid is wrapped by the package's errors: an argument no conversion
// can take (a scale that is 0, NaN or ±Inf, group sizes that do not fit).
var ErrInvalid = errors.New("fp8: invalid argument")

// checkScale refuses a scale the encoders cannot divide by: 0 (every code
// NaN or saturated), NaN, ±Inf (every code NaN or zero).
func checkScale(what string, scale float32) error {
	if scale == 0 || math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("%w: %s with scale %v (it must be nonzero and finite)", ErrInvalid, what, scale)
	}
	return nil
}

// checkArgs is checkScale and the mode: one of SatFinite, NoSat and Torch.
func checkArgs(what string, scale float32, m Mode) error {
	if m != SatFinite && m != NoSat && m != Torch {
		return fmt.Errorf("%w: %s with mode %d (want SatFinite, NoSat or Torch)", ErrInvalid, what, int(m))
	}
	return checkScale(what, scale)
}

// EncodeE4M3 sets dst[i] = ToE4M3(src[i]/scale, m) for every i. scale is the
// dequantization factor: src[i] ≈ dst[i].Float32() * scale. It returns the
// number of elements written, min(len(dst), len(src)), or 0 and an error
// wrapping ErrInvalid, writing nothing, for a scale that is 0, NaN or ±Inf
// or a mode other than SatFinite, NoSat and Torch.
// On amd64 CPUs with AVX2 or AVX-512 it converts 8 or 16 elements at a time
// in assembly (quant_amd64.s), bit for bit equal to encodeE4M3Go in every
// mode; the purego build tag turns that off.
func EncodeE4M3(dst []E4M3, src []float32, scale float32, m Mode) (int, error) {
	if err := checkArgs("EncodeE4M3", scale, m); err != nil {
		return 0, err
	}
	n := min(len(dst), len(src))
	i := encodeE4M3Vector(dst[:n], src[:n], scale, m)
	encodeE4M3Go(dst[i:n], src[i:n], scale, m)
	return n, nil
}

// encodeE4M3Go is EncodeE4M3's loop: the reference for the assembly.
func encodeE4M3Go(dst []E4M3, src []float32, scale float32, m Mode) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	if scale == 1 {
		for i, x := range src {
			dst[i] = E4M3(e4m3Format.convert(x, m))
		}
		return
	}
	for i, x := range src {
		dst[i] = E4M3(e4m3Format.convert(x/scale, m))
	}
}

// RoundE4M3 sets dst[i] = ToE4M3(src[i]/scale, m).Float32() for every i:
// the value of the code EncodeE4M3 would write, unscaled, as a float32 (every
// E4M3 value is one). It is EncodeE4M3 followed by DecodeE4M3 at scale 1, in
// one pass and without the bytes in between, for code that computes in
// float32 on quantized values (the cpu backend quantizes on read with it).
// It returns the number of elements written, min(len(dst), len(src)), or 0
// and an error wrapping ErrInvalid, writing nothing, for a scale that is 0,
// NaN or ±Inf or an unknown mode. On amd64 CPUs with AVX2 or AVX-512 it runs in assembly
// (quant_amd64.s), bit for bit equal to roundE4M3Go in every mode, NaN bits
// included; the purego build tag turns that off.
func RoundE4M3(dst, src []float32, scale float32, m Mode) (int, error) {
	if err := checkArgs("RoundE4M3", scale, m); err != nil {
		return 0, err
	}
	n := min(len(dst), len(src))
	i := roundE4M3Vector(dst[:n], src[:n], scale, m)
	roundE4M3Go(dst[i:n], src[i:n], scale, m)
	return n, nil
}

// roundE4M3Go is RoundE4M3's loop: the reference for the assembly.
func roundE4M3Go(dst, src []float32, scale float32, m Mode) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, x := range src {
		dst[i] = e4m3Table[e4m3Format.convert(x/scale, m)]
	}
}

// EncodeE5M2 sets dst[i] = ToE5M2(src[i]/scale, m) for every i and returns
// the number of elements written, min(len(dst), len(src)), or 0 and an
// error wrapping ErrInvalid, writing nothing, for a scale that is 0, NaN or
// ±Inf or an unknown mode.
func EncodeE5M2(dst []E5M2, src []float32, scale float32, m Mode) (int, error) {
	if err := checkArgs("EncodeE5M2", scale, m); err != nil {
		return 0, err
	}
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, x := range src {
		dst[i] = E5M2(e5m2Format.convert(x/scale, m))
	}
	return n, nil
}

// DecodeE4M3 sets dst[i] = src[i].Float32() * scale and returns the number
// of elements written, min(len(dst), len(src)). On amd64 CPUs with AVX2 it
// decodes 8 codes at a time in assembly (decode_amd64.s), bit for bit equal
// to the table (NaN payloads included); the purego build tag turns that off.
func DecodeE4M3(dst []float32, src []E4M3, scale float32) int {
	n := min(len(dst), len(src))
	i := decodeE4M3Vector(dst[:n], src[:n], scale)
	decodeE4M3Table(dst[i:n], src[i:n], scale)
	return n
}

// decodeE4M3Table is DecodeE4M3 through the decode table: the reference for
// the vector version.
func decodeE4M3Table(dst []float32, src []E4M3, scale float32) {
	dst = dst[:len(src)]
	t := &e4m3Table
	// Unrolled by four: independent table loads keep the load ports busy.
	i := 0
	for ; i+4 <= len(src); i += 4 {
		a, b, c, d := t[src[i]], t[src[i+1]], t[src[i+2]], t[src[i+3]]
		dst[i], dst[i+1], dst[i+2], dst[i+3] = a*scale, b*scale, c*scale, d*scale
	}
	for ; i < len(src); i++ {
		dst[i] = t[src[i]] * scale
	}
}

// DecodeE5M2 sets dst[i] = src[i].Float32() * scale through the decode
// table and returns the number of elements written, min(len(dst), len(src)).
func DecodeE5M2(dst []float32, src []E5M2, scale float32) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	t := &e5m2Table
	for i, c := range src {
		dst[i] = t[c] * scale
	}
	return n
}
