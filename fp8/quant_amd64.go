//go:build !purego

package fp8

// amaxVector returns the largest finite magnitude of the longest prefix of
// x whose length is a multiple of 16 (AVX-512) or 8 (AVX2), if the CPU has
// either, and that prefix's length.
func amaxVector(x []float32) (float32, int) {
	switch {
	case hasAVX512:
		return amaxPrefix(x, 16, amaxAVX512)
	case hasAVX2:
		return amaxPrefix(x, 8, amaxAVX2)
	}
	return 0, 0
}

func amaxPrefix(x []float32, width int, asm func(*float32, int) uint32) (float32, int) {
	n := len(x) &^ (width - 1)
	if n == 0 {
		return 0, 0
	}
	return float32frombits(asm(&x[0], n)), n
}

// encodeE4M3Vector converts, in assembly, the longest prefix of src whose
// length is a multiple of 16 (AVX-512) or 8 (AVX2), if the CPU has either,
// and returns its length. len(dst) >= len(src).
func encodeE4M3Vector(dst []E4M3, src []float32, scale float32, m Mode) int {
	ovf, nanSign, ok := encodeModeBits(m)
	if !ok {
		return 0
	}
	return convertPrefix(dst, src, scale, ovf, nanSign, encodeE4M3AVX512, encodeE4M3AVX2)
}

// convertPrefix runs the AVX-512 conversion (16 elements a step) or the
// AVX2 one (8), whichever the CPU has, over the longest prefix of src that
// is a whole number of steps, and returns its length (0 without either).
// len(dst) >= len(src).
func convertPrefix[T any](dst []T, src []float32, scale float32, ovf, nanSign uint32, avx512, avx2 func(*T, *float32, int, float32, uint32, uint32)) int {
	var width int
	var asm func(*T, *float32, int, float32, uint32, uint32)
	switch {
	case hasAVX512:
		width, asm = 16, avx512
	case hasAVX2:
		width, asm = 8, avx2
	default:
		return 0
	}
	n := len(src) &^ (width - 1)
	if n == 0 {
		return 0
	}
	_ = dst[n-1]
	asm(&dst[0], &src[0], n, scale, ovf, nanSign)
	return n
}

// roundE4M3Vector is encodeE4M3Vector for RoundE4M3: it rounds, in
// assembly, the longest prefix of src whose length is a multiple of 16
// (AVX-512) or 8 (AVX2), if the CPU has either, and returns its length.
// len(dst) >= len(src).
func roundE4M3Vector(dst, src []float32, scale float32, m Mode) int {
	ovf, nanSign, ok := roundModeBits(m)
	if !ok {
		return 0
	}
	return convertPrefix(dst, src, scale, ovf, nanSign, roundE4M3AVX512, roundE4M3AVX2)
}

// roundE4M3AVX512 sets dst[i] = roundE4M3Go's value of src[i] for i < n (n a
// positive multiple of 16), where ovf is the bits of an overflow's value
// (NaN 0x7fc00000 for NoSat and Torch, 448 for SatFinite; the sign is added)
// and nanSign is 1<<31 for Torch (a NaN keeps its sign) and 0 otherwise.
// It is encodeE4M3AVX512 with the value in place of the code: the same IEEE
// quotient q, rounded to E4M3's grid (nearest even) by the float sum
// (q + M) - M, M = max(1.5·2^(e+20), 1.5·2^14) for q's binade exponent e
// (quant_amd64.s); a >= 464+ulp overflows; then the sign (a zero result
// loses it in the sum); then NaN.
//
//go:noescape
func roundE4M3AVX512(dst, src *float32, n int, scale float32, ovf, nanSign uint32)

// roundE4M3AVX2 is roundE4M3AVX512 8 elements at a time (n a positive
// multiple of 8).
//
//go:noescape
func roundE4M3AVX2(dst, src *float32, n int, scale float32, ovf, nanSign uint32)

// encodeE4M3AVX512 sets dst[i] = ToE4M3(src[i]/scale, mode) for i < n (n a
// positive multiple of 16), where ovf is the magnitude code of an overflow
// (0x7f for NoSat and Torch, 0x7e for SatFinite) and nanSign is 0x80 for
// Torch (a NaN keeps its sign) and 0 otherwise. It is e4m3Format.convert on
// 16 lanes: the quotient is the same IEEE division; its magnitude a is
// rounded to E4M3's grid as roundE4M3AVX512 rounds, and the rounded value
// r gives its code as the bits of r·2^-120 shifted right by 20 (exact: the
// normal values' exponent and mantissa fields, the subnormal ones' k·2^-9
// as the float32 subnormal k<<20); a >= 464+ulp overflows; then the sign;
// then NaN.
//
//go:noescape
func encodeE4M3AVX512(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)

// encodeE4M3AVX2 is encodeE4M3AVX512 8 elements at a time (n a positive
// multiple of 8).
//
//go:noescape
func encodeE4M3AVX2(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)

// amaxAVX512 returns the bits of the largest finite |x[i]|, i < n (n a
// positive multiple of 16), or 0 if there is none: Amax's loop, on the
// magnitude bits, which order as unsigned integers for finite floats.
//
//go:noescape
func amaxAVX512(x *float32, n int) uint32

// amaxAVX2 is amaxAVX512 8 elements at a time (n a positive multiple of 8).
//
//go:noescape
func amaxAVX2(x *float32, n int) uint32
