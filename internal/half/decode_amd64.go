//go:build !purego

package half

import "golang.org/x/sys/cpu"

var hasF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

// decodeVector decodes, in assembly, the longest prefix of dst whose
// length is a multiple of 8, if the CPU has F16C, and returns its length.
func decodeVector(dst []float32, src []byte, unit float32) int {
	n := len(dst) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	_, _ = dst[n-1], src[2*n-1]
	decodeF16C(&dst[0], &src[0], n, unit)
	return n
}

// decodeF16C is decodeGo on the first n values (n a positive multiple of
// 8): VCVTPH2PS converts eight float16 to float32 exactly (a NaN quieted,
// its payload kept: ToFloat32), VMULPS multiplies them by unit, one
// rounding each; 32 values a round while 32 are left, then 8.
//
//go:noescape
func decodeF16C(dst *float32, src *byte, n int, unit float32)
