//go:build !purego

#include "textflag.h"

// The CPU backend's AVX2 micro-kernels (the "avx2" kernel set) and the
// CPUID vendor query. Each routine equals the Go loop named in its comment
// (kernels.go), with multiply-adds fused; the Go wrappers in
// kernels_amd64.go check the bounds first.
//
// Layouts: q and acc rows are d floats apart, v rows d floats apart, score
// rows (s, p) panel = 64 floats (256 bytes) apart, kt rows 64 floats apart.

// ZERO_Y0_Y7 and ZERO_Y8_Y11 clear accumulators (the score kernels,
// fmaPeakAVX2).
#define ZERO_Y0_Y7 \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7
#define ZERO_Y8_Y11 \
	VXORPS Y8, Y8, Y8; VXORPS Y9, Y9, Y9; VXORPS Y10, Y10, Y10; VXORPS Y11, Y11, Y11

// EXP8_CONSTS loads the constants of exp32's algorithm into Y5-Y14, eight
// lanes each (EXP8's operands): -87.33654 (Y5), 1 (Y6), the polynomial's
// coefficients 1/2 to 1/720 (Y7-Y11), ln2's low and high parts (Y12,
// Y13) and log2e (Y14). It writes AX.
#define EXP8_CONSTS \
	MOVL $0xc2aeac4f, AX; VMOVD AX, X5; VBROADCASTSS X5, Y5; \
	MOVL $0x3f800000, AX; VMOVD AX, X6; VBROADCASTSS X6, Y6; \
	MOVL $0x3f000000, AX; VMOVD AX, X7; VBROADCASTSS X7, Y7; \
	MOVL $0x3e2aaaab, AX; VMOVD AX, X8; VBROADCASTSS X8, Y8; \
	MOVL $0x3d2aaaab, AX; VMOVD AX, X9; VBROADCASTSS X9, Y9; \
	MOVL $0x3c088889, AX; VMOVD AX, X10; VBROADCASTSS X10, Y10; \
	MOVL $0x3ab60b61, AX; VMOVD AX, X11; VBROADCASTSS X11, Y11; \
	MOVL $0xb95e8083, AX; VMOVD AX, X12; VBROADCASTSS X12, Y12; \
	MOVL $0x3f318000, AX; VMOVD AX, X13; VBROADCASTSS X13, Y13; \
	MOVL $0x3fb8aa3b, AX; VMOVD AX, X14; VBROADCASTSS X14, Y14

// EXP8 sets Y0 = e^Y0 by exp32's steps on EXP8_CONSTS's constants, eight
// lanes at a time: lanes below -87.33654 (below the normal range, or -Inf)
// become 0; k = round(x·log2e); r = x - k·ln2hi - k·ln2lo; e^r by the
// degree-6 polynomial in Horner form with fused multiply-adds; times 2^k
// built in the exponent bits (k in [-126, 0] for x <= 0). NaN stays NaN.
// It writes Y1-Y3.
#define EXP8 \
	VCMPPS $1, Y5, Y0, Y1; \
	VMAXPS Y0, Y5, Y0; \
	VMULPS Y14, Y0, Y2; \
	VROUNDPS $0, Y2, Y2; \
	VMOVAPS Y0, Y3; \
	VFNMADD231PS Y13, Y2, Y3; \
	VFNMADD231PS Y12, Y2, Y3; \
	VMOVAPS Y11, Y0; \
	VFMADD213PS Y10, Y3, Y0; \
	VFMADD213PS Y9, Y3, Y0; \
	VFMADD213PS Y8, Y3, Y0; \
	VFMADD213PS Y7, Y3, Y0; \
	VFMADD213PS Y6, Y3, Y0; \
	VFMADD213PS Y6, Y3, Y0; \
	VCVTPS2DQ Y2, Y2; \
	VPSLLD $23, Y2, Y2; \
	VPADDD Y6, Y2, Y2; \
	VMULPS Y2, Y0, Y0; \
	VANDNPS Y0, Y1, Y0

// func scores4x64AVX2(s, q, kt *float32, d int, scale float32, blocks, stride int)
// Equals scores4Go on the first 16·blocks keys (blocks in [1, 4]; s and kt
// at the first key of the first block), row r of s at r·stride floats.
// Column blocks of 16 keys; each block keeps 4 rows x 16 keys in eight
// accumulators, fed per i by two kt loads and four q broadcasts.
TEXT ·scores4x64AVX2(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	VBROADCASTSS scale+32(FP), Y15
	MOVQ blocks+40(FP), R11
	MOVQ stride+48(FP), R14
	SHLQ $2, R14

s4avx2_block:
	ZERO_Y0_Y7
	MOVQ SI, R12
	LEAQ (R12)(CX*4), R8
	LEAQ (R8)(CX*4), R9
	LEAQ (R9)(CX*4), R10
	MOVQ DX, R13
	MOVQ CX, BX
	TESTQ BX, BX
	JZ s4avx2_store

s4avx2_loop:
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VBROADCASTSS (R12), Y10
	VBROADCASTSS (R8), Y11
	VBROADCASTSS (R9), Y12
	VBROADCASTSS (R10), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ $256, R13
	ADDQ $4, R12
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ BX
	JNZ s4avx2_loop

s4avx2_store:
	VMULPS Y15, Y0, Y0
	VMULPS Y15, Y1, Y1
	VMULPS Y15, Y2, Y2
	VMULPS Y15, Y3, Y3
	VMULPS Y15, Y4, Y4
	VMULPS Y15, Y5, Y5
	VMULPS Y15, Y6, Y6
	VMULPS Y15, Y7, Y7
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	LEAQ (DI)(R14*1), BX
	VMOVUPS Y2, (BX)
	VMOVUPS Y3, 32(BX)
	VMOVUPS Y4, (DI)(R14*2)
	VMOVUPS Y5, 32(DI)(R14*2)
	LEAQ (BX)(R14*2), BX
	VMOVUPS Y6, (BX)
	VMOVUPS Y7, 32(BX)
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ R11
	JNZ s4avx2_block
	VZEROUPPER
	RET

// func scores4x24AVX2(s, q, kt *float32, d int, scale float32, stride int)
// Equals scores4Go on the first 24 keys (s and kt at the first key), row r
// of s at r·stride floats: scores4x64AVX2's block widened to three key
// vectors, twelve accumulators fed per i by three kt loads and four q
// broadcasts (each lane's sum over i in the same order, so bit for bit
// scores4x64AVX2's on the same keys).
TEXT ·scores4x24AVX2(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	MOVQ stride+40(FP), R14
	SHLQ $2, R14
	ZERO_Y0_Y7
	ZERO_Y8_Y11
	LEAQ (SI)(CX*4), R8
	LEAQ (R8)(CX*4), R9
	LEAQ (R9)(CX*4), R10
	TESTQ CX, CX
	JZ s24avx2_store

s24avx2_loop:
	VMOVUPS (DX), Y12
	VMOVUPS 32(DX), Y13
	VMOVUPS 64(DX), Y14
	VBROADCASTSS (SI), Y15
	VFMADD231PS Y12, Y15, Y0
	VFMADD231PS Y13, Y15, Y1
	VFMADD231PS Y14, Y15, Y2
	VBROADCASTSS (R8), Y15
	VFMADD231PS Y12, Y15, Y3
	VFMADD231PS Y13, Y15, Y4
	VFMADD231PS Y14, Y15, Y5
	VBROADCASTSS (R9), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VFMADD231PS Y14, Y15, Y8
	VBROADCASTSS (R10), Y15
	VFMADD231PS Y12, Y15, Y9
	VFMADD231PS Y13, Y15, Y10
	VFMADD231PS Y14, Y15, Y11
	ADDQ $256, DX
	ADDQ $4, SI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JNZ s24avx2_loop

s24avx2_store:
	VBROADCASTSS scale+32(FP), Y15
	VMULPS Y15, Y0, Y0
	VMULPS Y15, Y1, Y1
	VMULPS Y15, Y2, Y2
	VMULPS Y15, Y3, Y3
	VMULPS Y15, Y4, Y4
	VMULPS Y15, Y5, Y5
	VMULPS Y15, Y6, Y6
	VMULPS Y15, Y7, Y7
	VMULPS Y15, Y8, Y8
	VMULPS Y15, Y9, Y9
	VMULPS Y15, Y10, Y10
	VMULPS Y15, Y11, Y11
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	LEAQ (DI)(R14*1), BX
	VMOVUPS Y3, (BX)
	VMOVUPS Y4, 32(BX)
	VMOVUPS Y5, 64(BX)
	VMOVUPS Y6, (DI)(R14*2)
	VMOVUPS Y7, 32(DI)(R14*2)
	VMOVUPS Y8, 64(DI)(R14*2)
	LEAQ (BX)(R14*2), BX
	VMOVUPS Y9, (BX)
	VMOVUPS Y10, 32(BX)
	VMOVUPS Y11, 64(BX)
	VZEROUPPER
	RET

// func pv4x8AVX2(acc, p, v *float32, d, n, cols, stride int, alpha *[4]float32)
// Equals pv4StridedGo on columns [0, cols). Blocks of 16 columns keep 4
// rows x 16 columns in eight accumulators (two v loads, four p broadcasts
// per key: p's rows at 0, R14, 2·R14 and R15 = 3·R14 bytes); a last block
// of 8 columns uses four.
TEXT ·pv4x8AVX2(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ d+24(FP), CX
	MOVQ n+32(FP), BX
	MOVQ cols+40(FP), R11
	MOVQ stride+48(FP), R14
	SHLQ $2, R14
	LEAQ (R14)(R14*2), R15
	MOVQ alpha+56(FP), AX
	VBROADCASTSS 0(AX), Y12
	VBROADCASTSS 4(AX), Y13
	VBROADCASTSS 8(AX), Y14
	VBROADCASTSS 12(AX), Y15
	SHLQ $2, CX
	SHLQ $2, R11
	LEAQ (DI)(CX*1), R8
	LEAQ (R8)(CX*1), R9
	LEAQ (R9)(CX*1), R10

pv4avx2_c16:
	CMPQ R11, $64
	JLT pv4avx2_c8
	VMULPS (DI), Y12, Y0
	VMULPS 32(DI), Y12, Y1
	VMULPS (R8), Y13, Y2
	VMULPS 32(R8), Y13, Y3
	VMULPS (R9), Y14, Y4
	VMULPS 32(R9), Y14, Y5
	VMULPS (R10), Y15, Y6
	VMULPS 32(R10), Y15, Y7
	MOVQ SI, R12
	MOVQ DX, R13
	MOVQ BX, AX
	TESTQ AX, AX
	JZ pv4avx2_s16

pv4avx2_l16:
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VBROADCASTSS (R12), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VBROADCASTSS (R12)(R14*1), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS (R12)(R14*2), Y10
	VFMADD231PS Y8, Y10, Y4
	VFMADD231PS Y9, Y10, Y5
	VBROADCASTSS (R12)(R15*1), Y11
	VFMADD231PS Y8, Y11, Y6
	VFMADD231PS Y9, Y11, Y7
	ADDQ CX, R13
	ADDQ $4, R12
	DECQ AX
	JNZ pv4avx2_l16

pv4avx2_s16:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, (R8)
	VMOVUPS Y3, 32(R8)
	VMOVUPS Y4, (R9)
	VMOVUPS Y5, 32(R9)
	VMOVUPS Y6, (R10)
	VMOVUPS Y7, 32(R10)
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, DX
	SUBQ $64, R11
	JMP pv4avx2_c16

pv4avx2_c8:
	CMPQ R11, $32
	JLT pv4avx2_done
	VMULPS (DI), Y12, Y0
	VMULPS (R8), Y13, Y2
	VMULPS (R9), Y14, Y4
	VMULPS (R10), Y15, Y6
	MOVQ SI, R12
	MOVQ DX, R13
	MOVQ BX, AX
	TESTQ AX, AX
	JZ pv4avx2_s8

pv4avx2_l8:
	VMOVUPS (R13), Y8
	VBROADCASTSS (R12), Y10
	VFMADD231PS Y8, Y10, Y0
	VBROADCASTSS (R12)(R14*1), Y11
	VFMADD231PS Y8, Y11, Y2
	VBROADCASTSS (R12)(R14*2), Y10
	VFMADD231PS Y8, Y10, Y4
	VBROADCASTSS (R12)(R15*1), Y11
	VFMADD231PS Y8, Y11, Y6
	ADDQ CX, R13
	ADDQ $4, R12
	DECQ AX
	JNZ pv4avx2_l8

pv4avx2_s8:
	VMOVUPS Y0, (DI)
	VMOVUPS Y2, (R8)
	VMOVUPS Y4, (R9)
	VMOVUPS Y6, (R10)
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, DX
	SUBQ $32, R11
	JMP pv4avx2_c8

pv4avx2_done:
	VZEROUPPER
	RET

// func pv1x8AVX2(acc, p, v *float32, d, n, cols int, alpha float32)
// Equals pv1Go on columns [0, cols): blocks of 32 columns in four
// accumulators, then blocks of 8 in one.
TEXT ·pv1x8AVX2(SB), NOSPLIT, $0-52
	MOVQ acc+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ d+24(FP), CX
	MOVQ n+32(FP), BX
	MOVQ cols+40(FP), R11
	VBROADCASTSS alpha+48(FP), Y15
	SHLQ $2, CX
	SHLQ $2, R11

pv1avx2_c32:
	CMPQ R11, $128
	JLT pv1avx2_c8
	VMULPS (DI), Y15, Y0
	VMULPS 32(DI), Y15, Y1
	VMULPS 64(DI), Y15, Y2
	VMULPS 96(DI), Y15, Y3
	MOVQ SI, R12
	MOVQ DX, R13
	MOVQ BX, AX
	TESTQ AX, AX
	JZ pv1avx2_s32

pv1avx2_l32:
	VBROADCASTSS (R12), Y8
	VFMADD231PS (R13), Y8, Y0
	VFMADD231PS 32(R13), Y8, Y1
	VFMADD231PS 64(R13), Y8, Y2
	VFMADD231PS 96(R13), Y8, Y3
	ADDQ CX, R13
	ADDQ $4, R12
	DECQ AX
	JNZ pv1avx2_l32

pv1avx2_s32:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, DX
	SUBQ $128, R11
	JMP pv1avx2_c32

pv1avx2_c8:
	CMPQ R11, $32
	JLT pv1avx2_done
	VMULPS (DI), Y15, Y0
	MOVQ SI, R12
	MOVQ DX, R13
	MOVQ BX, AX
	TESTQ AX, AX
	JZ pv1avx2_s8

pv1avx2_l8:
	VBROADCASTSS (R12), Y8
	VFMADD231PS (R13), Y8, Y0
	ADDQ CX, R13
	ADDQ $4, R12
	DECQ AX
	JNZ pv1avx2_l8

pv1avx2_s8:
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $32, R11
	JMP pv1avx2_c8

pv1avx2_done:
	VZEROUPPER
	RET

// func max8AVX2(s *float32, n int) (m float32, nan bool)
// Equals rowMaxGo on s[:n] (n a positive multiple of 8): a running maximum
// in 8 lanes, then across them; an unordered compare of every element
// reports NaN, which VMAXPS alone would drop.
TEXT ·max8AVX2(SB), NOSPLIT, $0-21
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX
	VMOVD AX, X0
	VBROADCASTSS X0, Y0
	VXORPS Y1, Y1, Y1

max8avx2_loop:
	VMOVUPS (SI), Y2
	VMAXPS Y2, Y0, Y0
	VCMPPS $3, Y2, Y2, Y3
	VORPS Y3, Y1, Y1
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ max8avx2_loop

	VEXTRACTF128 $1, Y0, X2
	VMAXPS X2, X0, X0
	VPERMILPS $0x4e, X0, X2
	VMAXPS X2, X0, X0
	VPERMILPS $0xb1, X0, X2
	VMAXPS X2, X0, X0
	VMOVMSKPS Y1, AX
	TESTL AX, AX
	SETNE nan+20(FP)
	JEQ max8avx2_store
	MOVL $0x7fc00000, AX
	VMOVD AX, X0

max8avx2_store:
	VMOVSS X0, m+16(FP)
	VZEROUPPER
	RET

// func expSum8AVX2(s *float32, n int, m float32) float32
// Equals expSumGo on s[:n] (n a positive multiple of 8), 8 lanes at a time:
// x = s-m; lanes with x < -87.33654 (below the normal range, or -Inf)
// become 0; k = round(x*log2e); r = x - k*ln2hi - k*ln2lo; e^r by exp32's
// degree-6 polynomial in Horner form with fused multiply-adds; times 2^k
// built in the exponent bits (k in [-126, 0] for x <= 0). NaN stays NaN.
TEXT ·expSum8AVX2(SB), NOSPLIT, $0-28
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	EXP8_CONSTS
	VXORPS Y4, Y4, Y4

expsum8avx2_loop:
	VMOVUPS (SI), Y0
	VSUBPS Y15, Y0, Y0
	EXP8
	VMOVUPS Y0, (SI)
	VADDPS Y0, Y4, Y4
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ expsum8avx2_loop

	VEXTRACTF128 $1, Y4, X0
	VADDPS X0, X4, X4
	VPERMILPS $0x4e, X4, X0
	VADDPS X0, X4, X4
	VPERMILPS $0xb1, X4, X0
	VADDPS X0, X4, X4
	VMOVSS X4, ret+24(FP)
	VZEROUPPER
	RET

// The sign bit and its complement, eight lanes each (softcap8AVX2's
// memory operands: its loop holds every register but these).
DATA signMask8<>+0(SB)/8, $0x8000000080000000
DATA signMask8<>+8(SB)/8, $0x8000000080000000
DATA signMask8<>+16(SB)/8, $0x8000000080000000
DATA signMask8<>+24(SB)/8, $0x8000000080000000
GLOBL signMask8<>(SB), RODATA|NOPTR, $32
DATA absMask8<>+0(SB)/8, $0x7fffffff7fffffff
DATA absMask8<>+8(SB)/8, $0x7fffffff7fffffff
DATA absMask8<>+16(SB)/8, $0x7fffffff7fffffff
DATA absMask8<>+24(SB)/8, $0x7fffffff7fffffff
GLOBL absMask8<>(SB), RODATA|NOPTR, $32

// func softcap8AVX2(s *float32, n int, m2, ck float32)
// Equals softcapRow's two loops on s[:n] (n a positive multiple of 8) with
// the avx2 set's exponential, 8 lanes at a time: t = |x|·m2; e = e^t by
// expSum8AVX2's steps (t - 0 is t, so the subtraction is left out); x =
// ck·(1-e)/(1+e), each operation rounded in that order, with x's sign
// (softcapOf).
TEXT ·softcap8AVX2(SB), NOSPLIT, $0-24
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m2+16(FP), Y15
	VBROADCASTSS ck+20(FP), Y4
	EXP8_CONSTS

softcap8avx2_loop:
	VMOVUPS (SI), Y0
	VANDPS absMask8<>(SB), Y0, Y0
	VMULPS Y15, Y0, Y0
	EXP8 // e
	VSUBPS Y0, Y6, Y1  // 1 - e
	VADDPS Y0, Y6, Y2  // 1 + e
	VMULPS Y4, Y1, Y1
	VDIVPS Y2, Y1, Y1
	VMOVUPS (SI), Y3
	VANDPS signMask8<>(SB), Y3, Y3
	VORPS Y3, Y1, Y1
	VMOVUPS Y1, (SI)
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ softcap8avx2_loop
	VZEROUPPER
	RET

// func scaleRows8AVX2(dst *float32, stride int, src *float32, d int, f *float32, rows int)
// Equals scaleRowsGo: for each row r < rows, dst[r*stride+c] =
// src[r*d+c]·f[r], eight columns a step, then the columns after the last
// eight one at a time (one rounding each, as the Go loop).
TEXT ·scaleRows8AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ d+24(FP), CX
	MOVQ f+32(FP), DX
	MOVQ rows+40(FP), R9

scalerows8avx2_row:
	VBROADCASTSS (DX), Y0
	MOVQ DI, R10
	MOVQ CX, BX
	SHRQ $3, BX
	JZ scalerows8avx2_tail

scalerows8avx2_vec:
	VMULPS (SI), Y0, Y1
	VMOVUPS Y1, (R10)
	ADDQ $32, SI
	ADDQ $32, R10
	DECQ BX
	JNZ scalerows8avx2_vec

scalerows8avx2_tail:
	MOVQ CX, BX
	ANDQ $7, BX
	JZ scalerows8avx2_next

scalerows8avx2_one:
	VMULSS (SI), X0, X1
	VMOVSS X1, (R10)
	ADDQ $4, SI
	ADDQ $4, R10
	DECQ BX
	JNZ scalerows8avx2_one

scalerows8avx2_next:
	ADDQ R8, DI
	ADDQ $4, DX
	DECQ R9
	JNZ scalerows8avx2_row
	VZEROUPPER
	RET

// func transpose8x8AVX2(dst *float32, ldDst int, src *float32, ldSrc int)
// Equals, for i, j < 8: dst[i*ldDst+j] = src[j*ldSrc+i] (strides in
// floats): eight row loads, the unpack / shuffle / lane-permute network,
// eight row stores.
TEXT ·transpose8x8AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ ldDst+8(FP), DX
	MOVQ src+16(FP), SI
	MOVQ ldSrc+24(FP), CX
	SHLQ $2, DX
	SHLQ $2, CX
	LEAQ (CX)(CX*2), BX // 3 rows
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(CX*1), Y1
	VMOVUPS (SI)(CX*2), Y2
	VMOVUPS (SI)(BX*1), Y3
	LEAQ (SI)(CX*4), SI
	VMOVUPS (SI), Y4
	VMOVUPS (SI)(CX*1), Y5
	VMOVUPS (SI)(CX*2), Y6
	VMOVUPS (SI)(BX*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xee, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xee, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xee, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xee, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	LEAQ (DX)(DX*2), BX
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(DX*1)
	VMOVUPS Y10, (DI)(DX*2)
	VMOVUPS Y11, (DI)(BX*1)
	LEAQ (DI)(DX*4), DI
	VMOVUPS Y12, (DI)
	VMOVUPS Y13, (DI)(DX*1)
	VMOVUPS Y14, (DI)(DX*2)
	VMOVUPS Y15, (DI)(BX*1)
	VZEROUPPER
	RET

// func fmaPeakAVX2(n int)
// fmaPeakAVX512 with 8-wide AVX2 FMAs: 12 chains, 192 flops an iteration.
TEXT ·fmaPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZERO_Y0_Y7
	ZERO_Y8_Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	TESTQ CX, CX
	JZ fmapeak256_done

fmapeak256_loop:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ CX
	JNZ fmapeak256_loop

fmapeak256_done:
	VZEROUPPER
	RET

// func cpuVendor() (ebx, edx, ecx uint32)
TEXT ·cpuVendor(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, ebx+0(FP)
	MOVL DX, edx+4(FP)
	MOVL CX, ecx+8(FP)
	RET
