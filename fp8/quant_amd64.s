//go:build !purego

#include "textflag.h"

// Constants the AVX2 encoder reads from memory (it has too few registers to
// hold them all): each 8 copies of one dword.
#define DWORDS8(name, v) \
	DATA name<>+0(SB)/4, $v; DATA name<>+4(SB)/4, $v; DATA name<>+8(SB)/4, $v; DATA name<>+12(SB)/4, $v; \
	DATA name<>+16(SB)/4, $v; DATA name<>+20(SB)/4, $v; DATA name<>+24(SB)/4, $v; DATA name<>+28(SB)/4, $v; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

DWORDS8(lastInRange, 0x43e80000) // the largest magnitude that does not overflow E4M3 (464, ties to 448)
DWORDS8(infBits, 0x7f800000)     // +Inf: larger magnitude bits are NaN
DWORDS8(signByte, 0x80)
DWORDS8(nanCode, 0x7f)
DWORDS8(subQuantum, 0x3b000000) // 2^-9, the E4M3 subnormal quantum
DWORDS8(signBit, 0x80000000)
DWORDS8(nanBits, 0x7fc00000)    // the NaN E4M3 decodes to

// CONVERT_ARGS_AVX2 loads the arguments shared by the AVX2 conversions
// (dst, src, n, scale, ovf, nanSign) into DI, SI, CX, Y15, Y14 and Y13, and
// the constants both use: Y12 the magnitude mask, Y11 half an E4M3 ulp less
// one at mantissa shift 20, Y10 ones, Y8 2^-6 (the smallest normal E4M3),
// Y7 512.0 = 2^9 (one over the E4M3 subnormal quantum).
#define CONVERT_ARGS_AVX2 \
	MOVQ dst+0(FP), DI; MOVQ src+8(FP), SI; MOVQ n+16(FP), CX; \
	VBROADCASTSS scale+24(FP), Y15; \
	MOVL ovf+28(FP), AX; VMOVD AX, X14; VPBROADCASTD X14, Y14; \
	MOVL nanSign+32(FP), AX; VMOVD AX, X13; VPBROADCASTD X13, Y13; \
	MOVL $0x7fffffff, AX; VMOVD AX, X12; VPBROADCASTD X12, Y12; \
	MOVL $0x7ffff, AX; VMOVD AX, X11; VPBROADCASTD X11, Y11; \
	MOVL $1, AX; VMOVD AX, X10; VPBROADCASTD X10, Y10; \
	MOVL $0x3c800000, AX; VMOVD AX, X8; VPBROADCASTD X8, Y8; \
	MOVL $0x44000000, AX; VMOVD AX, X7; VPBROADCASTD X7, Y7

// CONVERT_ARGS_AVX512 is CONVERT_ARGS_AVX2 for the AVX-512 conversions, into
// Z15 (scale), Z14 (ovf), Z13 (nanSign), Z12, Z11, Z10, Z8 and Z7, plus Z6,
// the first magnitude that overflows E4M3, and Z5, the bits of +Inf (larger
// magnitude bits are NaN).
#define CONVERT_ARGS_AVX512 \
	MOVQ dst+0(FP), DI; MOVQ src+8(FP), SI; MOVQ n+16(FP), CX; \
	VBROADCASTSS scale+24(FP), Z15; \
	MOVL ovf+28(FP), AX; VPBROADCASTD AX, Z14; \
	MOVL nanSign+32(FP), AX; VPBROADCASTD AX, Z13; \
	MOVL $0x7fffffff, AX; VPBROADCASTD AX, Z12; \
	MOVL $0x7ffff, AX; VPBROADCASTD AX, Z11; \
	MOVL $1, AX; VPBROADCASTD AX, Z10; \
	MOVL $0x3c800000, AX; VPBROADCASTD AX, Z8; \
	MOVL $0x44000000, AX; VPBROADCASTD AX, Z7; \
	MOVL $0x43e80001, AX; VPBROADCASTD AX, Z6; \
	MOVL $0x7f800000, AX; VPBROADCASTD AX, Z5

// NEXT_ROUNDED_AVX2 loads the next 8 floats, divides them by the scale (Y0:
// q, with its sign) and rounds their magnitude half to even at E4M3's
// normal precision: Y1 = a, the magnitude bits of q; Y3 = a + half an ulp
// less one + the bit that decides a tie (Y2), whose bits from 20 up are the
// rounded exponent and 3 mantissa bits. The encoder and the rounder differ
// only in what they take from Y3, and in the cases below 2^-6 and past 464.
#define NEXT_ROUNDED_AVX2 \
	VMOVUPS (SI), Y0; VDIVPS Y15, Y0, Y0; \
	VPAND Y12, Y0, Y1; VPSRLD $20, Y1, Y2; VPAND Y10, Y2, Y2; \
	VPADDD Y11, Y1, Y3; VPADDD Y2, Y3, Y3

// NEXT_ROUNDED_AVX512 is NEXT_ROUNDED_AVX2 for 16 floats: Z0 q, Z1 a, Z20
// the tie bit, Z16 the rounded sum.
#define NEXT_ROUNDED_AVX512 \
	VMOVUPS (SI), Z0; VDIVPS Z15, Z0, Z0; \
	VPANDD Z12, Z0, Z1; VPSRLD $20, Z1, Z20; VPANDD Z10, Z20, Z20; \
	VPADDD Z11, Z1, Z16; VPADDD Z20, Z16, Z16

// func encodeE4M3AVX512(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)
// Equals e4m3Format.convert(src[i]/scale, mode) for i < n, n a positive
// multiple of 16; see the declaration in quant_amd64.go.
TEXT ·encodeE4M3AVX512(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX512
	MOVL $0x3c0, AX
	VPBROADCASTD AX, Z9      // 120<<3: exponent bias 127 -> 7
	MOVL $0x80, AX
	VPBROADCASTD AX, Z4
	MOVL $0x7f, AX
	VPBROADCASTD AX, Z3

loop512:
	NEXT_ROUNDED_AVX512
	VPSRLD $20, Z16, Z16
	VPSUBD Z9, Z16, Z16         // normal code: exponent and 3 mantissa bits, rounded
	VMULPS Z7, Z1, Z17          // a·2^9, exact
	VCVTPS2DQ Z17, Z17          // rounded to nearest even: the subnormal code 0..8
	VPCMPUD $1, Z8, Z1, K1      // a < 2^-6: subnormal
	VMOVDQA32 Z17, K1, Z16
	VPCMPUD $5, Z6, Z1, K2      // a >= first overflow (±Inf included)
	VMOVDQA32 Z14, K2, Z16
	VPSRLD $24, Z0, Z18
	VPANDD Z4, Z18, Z18         // the sign, at bit 7
	VPORD Z18, Z16, Z16
	VPCMPUD $6, Z5, Z1, K3      // a > Inf bits: NaN
	VPANDD Z13, Z18, Z19
	VPORD Z3, Z19, Z19          // 0x7f, with the sign for Torch
	VMOVDQA32 Z19, K3, Z16
	VPMOVDB Z16, (DI)
	ADDQ $64, SI
	ADDQ $16, DI
	SUBQ $16, CX
	JNZ loop512
	VZEROUPPER
	RET

// func encodeE4M3AVX2(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)
// encodeE4M3AVX512 8 elements at a time (n a positive multiple of 8), with
// blends for the masks and a pack for the narrowing store.
TEXT ·encodeE4M3AVX2(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX2
	MOVL $0x3c0, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9

loop:
	NEXT_ROUNDED_AVX2
	VPSRLD $20, Y3, Y3
	VPSUBD Y9, Y3, Y3                // normal code
	VMULPS Y7, Y1, Y4
	VCVTPS2DQ Y4, Y4                 // subnormal code
	VPCMPGTD Y1, Y8, Y5              // 2^-6 > a
	VPBLENDVB Y5, Y4, Y3, Y3
	VPCMPGTD lastInRange<>(SB), Y1, Y5 // a > 464: overflow
	VPBLENDVB Y5, Y14, Y3, Y3
	VPSRLD $24, Y0, Y6
	VPAND signByte<>(SB), Y6, Y6
	VPOR Y6, Y3, Y3
	VPCMPGTD infBits<>(SB), Y1, Y5   // NaN
	VPAND Y13, Y6, Y6
	VPOR nanCode<>(SB), Y6, Y6
	VPBLENDVB Y5, Y6, Y3, Y3
	VEXTRACTI128 $1, Y3, X4
	VPACKUSDW X4, X3, X3             // eight words, lanes in order
	VPACKUSWB X3, X3, X3             // eight bytes
	MOVQ X3, (DI)
	ADDQ $32, SI
	ADDQ $8, DI
	SUBQ $8, CX
	JNZ loop
	VZEROUPPER
	RET

// func amaxAVX512(x *float32, n int) uint32
// The bits of the largest finite |x[i]|, i < n (n a positive multiple of
// 16), or 0: magnitudes of finite floats order as unsigned integers.
TEXT ·amaxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z12
	MOVL $0x7f7fffff, AX
	VPBROADCASTD AX, Z11     // the largest finite magnitude
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1

loopmax512:
	VPANDD (SI), Z12, Z2
	VPCMPUD $2, Z11, Z2, K1  // finite: a <= max finite
	VPMAXUD Z2, Z0, K1, Z0
	ADDQ $64, SI
	SUBQ $16, CX
	JNZ loopmax512
	VEXTRACTI64X4 $1, Z0, Y1
	VPMAXUD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

// func amaxAVX2(x *float32, n int) uint32
// amaxAVX512 8 elements at a time (n a positive multiple of 8).
TEXT ·amaxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0x7fffffff, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	VMOVDQU infBits<>(SB), Y11
	VPXOR Y0, Y0, Y0

loopmax:
	VPAND (SI), Y12, Y2
	VPCMPGTD Y2, Y11, Y3   // Inf > a: finite
	VPAND Y3, Y2, Y2       // non-finite lanes to 0
	VPMAXUD Y2, Y0, Y0
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ loopmax
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUD X1, X0, X0
	VMOVD X0, AX
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

// func roundE4M3AVX512(dst, src *float32, n int, scale float32, ovf, nanSign uint32)
// Equals e4m3Table[e4m3Format.convert(src[i]/scale, mode)] for i < n, n a
// positive multiple of 16; see the declaration in quant_amd64.go.
TEXT ·roundE4M3AVX512(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX512
	MOVL $0xfff00000, AX
	VPBROADCASTD AX, Z9      // sign, exponent and 3 mantissa bits
	MOVL $0x3b000000, AX
	VPBROADCASTD AX, Z4      // 2^-9
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z3      // NaN
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z2      // the sign bit

round512:
	NEXT_ROUNDED_AVX512
	VPANDD Z9, Z16, Z16         // normal value, rounded
	VMULPS Z7, Z1, Z17          // a·2^9, exact
	VCVTPS2DQ Z17, Z17          // rounded to nearest even: 0..8
	VCVTDQ2PS Z17, Z17
	VMULPS Z4, Z17, Z17         // the subnormal value, exact
	VPCMPUD $1, Z8, Z1, K1      // a < 2^-6: subnormal
	VMOVDQA32 Z17, K1, Z16
	VPCMPUD $5, Z6, Z1, K2      // a >= first overflow (±Inf included)
	VMOVDQA32 Z14, K2, Z16
	VPANDD Z2, Z0, Z18          // the sign
	VPORD Z18, Z16, Z16
	VPCMPUD $6, Z5, Z1, K3      // a > Inf bits: NaN
	VPANDD Z13, Z18, Z19
	VPORD Z3, Z19, Z19          // NaN, with the sign for Torch
	VMOVDQA32 Z19, K3, Z16
	VMOVUPS Z16, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ round512
	VZEROUPPER
	RET

// func roundE4M3AVX2(dst, src *float32, n int, scale float32, ovf, nanSign uint32)
// roundE4M3AVX512 8 elements at a time (n a positive multiple of 8), with
// blends for the masks.
TEXT ·roundE4M3AVX2(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX2
	MOVL $0xfff00000, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9

roundloop:
	NEXT_ROUNDED_AVX2
	VPAND Y9, Y3, Y3                 // normal value
	VMULPS Y7, Y1, Y4
	VCVTPS2DQ Y4, Y4
	VCVTDQ2PS Y4, Y4
	VMULPS subQuantum<>(SB), Y4, Y4  // subnormal value
	VPCMPGTD Y1, Y8, Y5              // 2^-6 > a
	VBLENDVPS Y5, Y4, Y3, Y3
	VPCMPGTD lastInRange<>(SB), Y1, Y5 // a > 464: overflow
	VBLENDVPS Y5, Y14, Y3, Y3
	VANDPS signBit<>(SB), Y0, Y6     // the sign
	VORPS Y6, Y3, Y3
	VPCMPGTD infBits<>(SB), Y1, Y5   // NaN
	VANDPS Y13, Y6, Y6
	VORPS nanBits<>(SB), Y6, Y6
	VBLENDVPS Y5, Y6, Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ roundloop
	VZEROUPPER
	RET
