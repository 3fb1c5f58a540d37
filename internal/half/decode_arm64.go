//go:build !purego

package half

// decodeVector decodes, in assembly, the longest prefix of dst whose
// length is a multiple of 8 and returns its length (every arm64 CPU has
// NEON's float16 conversions).
func decodeVector(dst []float32, src []byte, unit float32) int {
	n := len(dst) &^ 7
	if n == 0 {
		return 0
	}
	_, _ = dst[n-1], src[2*n-1]
	decodeNEON(&dst[0], &src[0], n, unit)
	return n
}

// decodeNEON is decodeGo on the first n values (n a positive multiple of
// 8): FCVTL and FCVTL2 convert eight float16 to float32 exactly (a NaN
// quieted, its payload kept: ToFloat32), FMUL multiplies them by unit,
// one rounding each.
//
//go:noescape
func decodeNEON(dst *float32, src *byte, n int, unit float32)
