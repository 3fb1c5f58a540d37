//go:build !purego

#include "textflag.h"

// Constants the AVX2 conversions read from memory (they have too few
// registers to hold them all): each 8 copies of one dword.
#define DWORDS8(name, v) \
	DATA name<>+0(SB)/4, $v; DATA name<>+4(SB)/4, $v; DATA name<>+8(SB)/4, $v; DATA name<>+12(SB)/4, $v; \
	DATA name<>+16(SB)/4, $v; DATA name<>+20(SB)/4, $v; DATA name<>+24(SB)/4, $v; DATA name<>+28(SB)/4, $v; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

DWORDS8(lastInRange, 0x43e80000) // the largest magnitude that does not overflow E4M3 (464, ties to 448)
DWORDS8(infBits, 0x7f800000)     // +Inf, the exponent bits: larger magnitude bits are NaN
DWORDS8(signByte, 0x80)
DWORDS8(nanCode, 0x7f)
DWORDS8(signBit, 0x80000000)
DWORDS8(nanBits, 0x7fc00000)    // the NaN E4M3 decodes to
DWORDS8(codeShift, 0x03800000)  // 2^-120 (see encodeE4M3AVX512)

// Rounding to E4M3's grid by a magic sum. For a magnitude a in the binade
// [2^e, 2^(e+1)), E4M3's quantum is 2^(e-3) (2^-9 below 2^-6, its
// subnormals); M = 1.5·2^(e+20), or 1.5·2^14 where that is larger, lies in
// a binade whose float32 ulp is that quantum, so the float sum q + M rounds
// q to the quantum, nearest even (M is an even multiple of it, and q + M
// stays in M's binade for either sign of q), and (q + M) - M is exact. M
// comes from q's exponent bits times 1.5·2^20 (+0 for zero and float32
// subnormals, so the 1.5·2^14 floor); a zero result loses q's sign, which
// is ORed back. Overflow (a >= 464+ulp, ±Inf included) and NaN are taken
// on masks, as before.

// CONVERT_ARGS_AVX2 loads the arguments shared by the AVX2 conversions
// (dst, src, n, scale, ovf, nanSign) into DI, SI, CX, Y15, Y14 and Y13, and
// the constants both use: Y12 the magnitude mask, Y11 1.5·2^20 and Y10
// 1.5·2^14 (the magic sums).
#define CONVERT_ARGS_AVX2 \
	MOVQ dst+0(FP), DI; MOVQ src+8(FP), SI; MOVQ n+16(FP), CX; \
	VBROADCASTSS scale+24(FP), Y15; \
	MOVL ovf+28(FP), AX; VMOVD AX, X14; VPBROADCASTD X14, Y14; \
	MOVL nanSign+32(FP), AX; VMOVD AX, X13; VPBROADCASTD X13, Y13; \
	MOVL $0x7fffffff, AX; VMOVD AX, X12; VPBROADCASTD X12, Y12; \
	MOVL $0x49c00000, AX; VMOVD AX, X11; VPBROADCASTD X11, Y11; \
	MOVL $0x46c00000, AX; VMOVD AX, X10; VPBROADCASTD X10, Y10

// MAGIC_AVX2(x) sets Y3 to x (q or |q|) rounded to E4M3's grid, Y0 being
// the quotient q, whose exponent bits choose M (Y4 clobbered).
#define MAGIC_AVX2(x) \
	VANDPS infBits<>(SB), Y0, Y3; VMULPS Y11, Y3, Y3; VMAXPS Y10, Y3, Y3; \
	VADDPS Y3, x, Y4; VSUBPS Y3, Y4, Y3

// CONVERT_ARGS_AVX512 is CONVERT_ARGS_AVX2 for the AVX-512 conversions, into
// Z15 (scale), Z14 (ovf), Z13 (nanSign), Z12, Z11 and Z10, plus Z6, the
// first magnitude that overflows E4M3, and Z5, the bits of +Inf (the
// exponent bits; larger magnitude bits are NaN).
#define CONVERT_ARGS_AVX512 \
	MOVQ dst+0(FP), DI; MOVQ src+8(FP), SI; MOVQ n+16(FP), CX; \
	VBROADCASTSS scale+24(FP), Z15; \
	MOVL ovf+28(FP), AX; VPBROADCASTD AX, Z14; \
	MOVL nanSign+32(FP), AX; VPBROADCASTD AX, Z13; \
	MOVL $0x7fffffff, AX; VPBROADCASTD AX, Z12; \
	MOVL $0x49c00000, AX; VPBROADCASTD AX, Z11; \
	MOVL $0x46c00000, AX; VPBROADCASTD AX, Z10; \
	MOVL $0x43e80001, AX; VPBROADCASTD AX, Z6; \
	MOVL $0x7f800000, AX; VPBROADCASTD AX, Z5

// MAGIC_AVX512(x) sets Z16 to x (q or |q|) rounded to E4M3's grid, Z0
// being the quotient q, whose exponent bits choose M (Z17 clobbered).
#define MAGIC_AVX512(x) \
	VPANDD Z5, Z0, Z16; VMULPS Z11, Z16, Z16; VMAXPS Z10, Z16, Z16; \
	VADDPS Z16, x, Z17; VSUBPS Z16, Z17, Z16

// func encodeE4M3AVX512(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)
// Equals e4m3Format.convert(src[i]/scale, mode) for i < n, n a positive
// multiple of 16; see the declaration in quant_amd64.go. The code of a
// rounded magnitude r is the bits of r·2^-120 shifted right by 20: a
// normal E4M3 value 2^(e-7)·(1+m/8) becomes the float32 with exponent field
// e and mantissa m<<20; a subnormal one, k·2^-9, the float32 subnormal
// k·2^-129, whose bits are k<<20 (exact in both cases; Go does not flush
// subnormals).
TEXT ·encodeE4M3AVX512(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX512
	MOVL $0x03800000, AX
	VPBROADCASTD AX, Z9      // 2^-120
	MOVL $0x80, AX
	VPBROADCASTD AX, Z4
	MOVL $0x7f, AX
	VPBROADCASTD AX, Z3

loop512:
	VMOVUPS (SI), Z0
	VDIVPS Z15, Z0, Z0              // q, the IEEE quotient
	VPANDD Z12, Z0, Z1              // a = |q|
	MAGIC_AVX512(Z1)
	VMULPS Z9, Z16, Z16
	VPSRLD $20, Z16, Z16            // the code of a
	VPCMPUD $5, Z6, Z1, K2          // a >= first overflow (±Inf and NaN included)
	VMOVDQA32 Z14, K2, Z16
	VPSRLD $24, Z0, Z18
	VPTERNLOGD $0xf8, Z4, Z18, Z16  // | the sign, at bit 7
	VPCMPUD $6, Z5, Z1, K3          // a > Inf bits: NaN
	VMOVDQA32 Z3, Z19
	VPTERNLOGD $0xf8, Z13, Z18, Z19 // 0x7f | (sign & nanSign): the sign for Torch
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

loop:
	VMOVUPS (SI), Y0
	VDIVPS Y15, Y0, Y0               // q
	VPAND Y12, Y0, Y1                // a = |q|
	MAGIC_AVX2(Y1)
	VMULPS codeShift<>(SB), Y3, Y3
	VPSRLD $20, Y3, Y3               // the code of a
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
// positive multiple of 16; see the declaration in quant_amd64.go. The
// magic sum rounds q itself (either sign), so the sign is ORed back only
// for zero results. A vector with no lane that overflows or is NaN (nearly
// every one, where the scale comes from the data's amax) skips the
// overflow and NaN selects.
TEXT ·roundE4M3AVX512(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX512
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z3      // NaN
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z2      // the sign bit

round512:
	VMOVUPS (SI), Z0
	VDIVPS Z15, Z0, Z0              // q, the IEEE quotient
	MAGIC_AVX512(Z0)                // q rounded (a zero result's sign lost)
	VPANDD Z12, Z0, Z1              // a = |q|
	VPCMPUD $5, Z6, Z1, K2          // a >= first overflow (±Inf and NaN included)
	KORTESTW K2, K2
	JNZ round512_ovf                // a lane overflows or is NaN: the full form
	VPTERNLOGD $0xf8, Z2, Z0, Z16   // | q's sign

round512_store:
	VMOVUPS Z16, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ round512
	VZEROUPPER
	RET

round512_ovf:
	VMOVDQA32 Z14, K2, Z16
	VPTERNLOGD $0xf8, Z2, Z0, Z16   // | q's sign
	VPCMPUD $6, Z5, Z1, K3          // a > Inf bits: NaN
	VMOVDQA32 Z3, Z19
	VPTERNLOGD $0xf8, Z13, Z0, Z19  // NaN | (q & nanSign): the sign for Torch
	VMOVDQA32 Z19, K3, Z16
	JMP round512_store

// func roundE4M3AVX2(dst, src *float32, n int, scale float32, ovf, nanSign uint32)
// roundE4M3AVX512 8 elements at a time (n a positive multiple of 8), with
// blends for the masks.
TEXT ·roundE4M3AVX2(SB), NOSPLIT, $0-36
	CONVERT_ARGS_AVX2

roundloop:
	VMOVUPS (SI), Y0
	VDIVPS Y15, Y0, Y0               // q
	MAGIC_AVX2(Y0)                   // q rounded
	VPAND Y12, Y0, Y1                // a
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
