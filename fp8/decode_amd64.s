//go:build !purego

#include "textflag.h"

// func decodeE4M3AVX2(dst *float32, src *E4M3, n int, scale float32)
// Equals decodeE4M3Table on src[:n], n a positive multiple of 8; see the
// declaration in decode_amd64.go for the arithmetic.
TEXT ·decodeE4M3AVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y15
	MOVL $0x7f, AX // magnitude mask, and the NaN magnitude
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x3c000000, AX // 120<<23: rebias the exponent 7 -> 127
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $8, AX // magnitudes below 8 are subnormal (exponent 0)
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $0x00800000, AX // 1<<23
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $0x3c800000, AX // 2^-6
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $0x7fc00000, AX // the table's NaN
	VMOVD AX, X9
	VPBROADCASTD X9, Y9

loop:
	VPMOVZXBD (SI), Y0
	VPAND Y14, Y0, Y1     // m = c & 0x7f
	VPXOR Y1, Y0, Y2      // the sign bit, at bit 7
	VPSLLD $24, Y2, Y2    // ... at bit 31
	VPSLLD $20, Y1, Y3
	VPADDD Y13, Y3, Y3    // normal value
	VPCMPGTD Y1, Y12, Y4  // m < 8: subnormal
	VPAND Y11, Y4, Y5
	VPADDD Y5, Y3, Y3     // 2^-6 + m*2^-9
	VPAND Y10, Y4, Y6
	VSUBPS Y6, Y3, Y3     // m*2^-9, exactly
	VPCMPEQD Y14, Y1, Y7  // m = 0x7f: NaN
	VPBLENDVB Y7, Y9, Y3, Y3
	VPOR Y2, Y3, Y3
	VMULPS Y15, Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ $8, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func decodeE4M3AVX512(dst *float32, src *E4M3, n int, scale float32)
// decodeE4M3AVX2 16 codes at a time (n a positive multiple of 16), with
// mask registers for the subnormal and NaN cases.
TEXT ·decodeE4M3AVX512(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Z15
	MOVL $0x7f, AX
	VPBROADCASTD AX, Z14
	MOVL $0x3c000000, AX
	VPBROADCASTD AX, Z13
	MOVL $8, AX
	VPBROADCASTD AX, Z12
	MOVL $0x00800000, AX
	VPBROADCASTD AX, Z11
	MOVL $0x3c800000, AX
	VPBROADCASTD AX, Z10
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z9

loop512:
	VPMOVZXBD (SI), Z0
	VPANDD Z14, Z0, Z1      // m = c & 0x7f
	VPXORD Z1, Z0, Z2       // the sign bit, at bit 7
	VPSLLD $24, Z2, Z2      // ... at bit 31
	VPSLLD $20, Z1, Z3
	VPADDD Z13, Z3, Z3      // normal value
	VPCMPUD $1, Z12, Z1, K1 // m < 8: subnormal
	VPADDD Z11, Z3, K1, Z3  // 2^-6 + m*2^-9
	VSUBPS Z10, Z3, K1, Z3  // m*2^-9, exactly
	VPCMPEQD Z14, Z1, K2    // m = 0x7f: NaN
	VMOVDQA32 Z9, K2, Z3
	VPORD Z2, Z3, Z3
	VMULPS Z15, Z3, Z3
	VMOVUPS Z3, (DI)
	ADDQ $16, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ loop512
	VZEROUPPER
	RET
