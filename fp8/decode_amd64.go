//go:build !purego

package fp8

import "golang.org/x/sys/cpu"

var (
	hasAVX2   = cpu.X86.HasAVX2
	hasAVX512 = cpu.X86.HasAVX512F
)

// decodeE4M3Vector decodes, in assembly, the longest prefix of src whose
// length is a multiple of 16 (AVX-512) or 8 (AVX2), if the CPU has either,
// and returns its length.
func decodeE4M3Vector(dst []float32, src []E4M3, scale float32) int {
	switch {
	case hasAVX512:
		return decodeVector(dst, src, scale, 16, decodeE4M3AVX512)
	case hasAVX2:
		return decodeVector(dst, src, scale, 8, decodeE4M3AVX2)
	}
	return 0
}

func decodeVector(dst []float32, src []E4M3, scale float32, width int, asm func(*float32, *E4M3, int, float32)) int {
	n := len(src) &^ (width - 1)
	if n == 0 {
		return 0
	}
	_ = dst[n-1]
	asm(&dst[0], &src[0], n, scale)
	return n
}

// decodeE4M3AVX2 is decodeE4M3Table on the first n codes (n a positive
// multiple of 8), by arithmetic instead of a table: for the magnitude bits
// m = c & 0x7f, the float32 with bits m<<20 + 120<<23 is the value of a
// normal code; a subnormal code (m < 8) gets 1<<23 more and then 2^-6 less,
// which is exact; m = 0x7f is NaN (bits 0x7fc00000); the sign bit moves to
// bit 31. The product with scale is the same single rounding.
//
//go:noescape
func decodeE4M3AVX2(dst *float32, src *E4M3, n int, scale float32)

// decodeE4M3AVX512 is decodeE4M3AVX2 16 codes at a time (n a positive
// multiple of 16).
//
//go:noescape
func decodeE4M3AVX512(dst *float32, src *E4M3, n int, scale float32)
