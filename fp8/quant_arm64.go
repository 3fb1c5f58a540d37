//go:build !purego

package fp8

// On arm64, Amax, EncodeE4M3, RoundE4M3 and DecodeE4M3 run their longest
// prefix of whole 16-element steps on NEON (quant_arm64.s), which every
// arm64 CPU has, bit for bit equal to the Go loops; the purego build tag
// turns that off.

// amaxVector returns the largest finite magnitude of the longest prefix of
// x whose length is a multiple of 16, and that prefix's length.
func amaxVector(x []float32) (float32, int) {
	n := len(x) &^ 15
	if n == 0 {
		return 0, 0
	}
	return float32frombits(amaxNEON(&x[0], n)), n
}

// encodeE4M3Vector converts the longest prefix of src whose length is a
// multiple of 16 and returns its length. len(dst) >= len(src).
func encodeE4M3Vector(dst []E4M3, src []float32, scale float32, m Mode) int {
	ovf, nanSign, ok := encodeModeBits(m)
	if !ok {
		return 0
	}
	n := len(src) &^ 15
	if n == 0 {
		return 0
	}
	_ = dst[n-1]
	encodeE4M3NEON(&dst[0], &src[0], n, scale, ovf, nanSign)
	return n
}

// roundE4M3Vector is encodeE4M3Vector for RoundE4M3.
func roundE4M3Vector(dst, src []float32, scale float32, m Mode) int {
	ovf, nanSign, ok := roundModeBits(m)
	if !ok {
		return 0
	}
	n := len(src) &^ 15
	if n == 0 {
		return 0
	}
	_ = dst[n-1]
	roundE4M3NEON(&dst[0], &src[0], n, scale, ovf, nanSign)
	return n
}

// decodeE4M3Vector decodes the longest prefix of src whose length is a
// multiple of 16 and returns its length. len(dst) >= len(src).
func decodeE4M3Vector(dst []float32, src []E4M3, scale float32) int {
	n := len(src) &^ 15
	if n == 0 {
		return 0
	}
	_ = dst[n-1]
	decodeE4M3NEON(&dst[0], &src[0], n, scale)
	return n
}

// encodeE4M3NEON sets dst[i] = ToE4M3(src[i]/scale, mode) for i < n (n a
// positive multiple of 16): encodeE4M3Go, bit for bit, where ovf is the
// magnitude code of an overflow (0x7f for NoSat and Torch, 0x7e for
// SatFinite) and nanSign is 0x80 for Torch (a NaN keeps its sign) and 0
// otherwise. It is the arithmetic of encodeE4M3AVX512 (quant_amd64.go) on
// four lanes: the same IEEE quotient, rounded to E4M3's grid by a magic
// sum, the code from the rounded value's bits (quant_arm64.s).
//
//go:noescape
func encodeE4M3NEON(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)

// roundE4M3NEON sets dst[i] = roundE4M3Go's value of src[i] for i < n (n a
// positive multiple of 16), where ovf is the bits of an overflow's value
// (NaN 0x7fc00000 for NoSat and Torch, 448 for SatFinite; the sign is
// added) and nanSign is 1<<31 for Torch and 0 otherwise.
//
//go:noescape
func roundE4M3NEON(dst, src *float32, n int, scale float32, ovf, nanSign uint32)

// amaxNEON returns the bits of the largest finite |x[i]|, i < n (n a
// positive multiple of 16), or 0 if there is none: amaxGo on the magnitude
// bits, which order as unsigned integers for finite floats.
//
//go:noescape
func amaxNEON(x *float32, n int) uint32

// decodeE4M3NEON is decodeE4M3Table on the first n codes (n a positive
// multiple of 16), by table lookups in registers: the high 16 bits of the
// value of each magnitude (the low 16 are zero) from two 128-byte tables
// (TBL, TBX), the sign ORed in, then the one rounding of the product with
// scale.
//
//go:noescape
func decodeE4M3NEON(dst *float32, src *E4M3, n int, scale float32)
