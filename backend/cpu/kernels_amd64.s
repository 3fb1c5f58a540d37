//go:build !purego

#include "textflag.h"
#include "softmax_amd64.h"

// (Defined here, before the first TEXT, since go vet's asmdecl would check
// their argument references against the TEXT above them.)
//
// STEPS_ENTRY copies the arguments that advance by group into the locals
// of a steps TEXT (q, acc, m, l and the groups left at 0-32(SP)).
#define STEPS_ENTRY \
	MOVQ q+8(FP), AX; \
	MOVQ AX, 0(SP); \
	MOVQ acc+72(FP), AX; \
	MOVQ AX, 8(SP); \
	MOVQ m+40(FP), AX; \
	MOVQ AX, 16(SP); \
	MOVQ l+48(FP), AX; \
	MOVQ AX, 24(SP); \
	MOVQ groups+80(FP), AX; \
	MOVQ AX, 32(SP)

// STEPS_REST(qshift, labels...) is the rest of a group's step after the
// sixteen accumulators hold its dot products: the softmax, P·V into acc,
// and the locals advanced by one group, q by d<<qshift bytes; the labels
// are SOFTMAX4X64's and PV4X16's. Leaves the groups left in 32(SP).
#define STEPS_REST(qshift, slow, rows, c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone) \
	VBROADCASTSS scale+32(FP), Z27; \
	MOVQ 16(SP), R11; \
	MOVQ 24(SP), R12; \
	MOVQ alpha+56(FP), R13; \
	SOFTMAX4X64(slow, rows); \
	MOVQ 8(SP), DI; \
	MOVQ s+0(FP), SI; \
	MOVQ v+64(FP), DX; \
	MOVQ d+24(FP), CX; \
	MOVQ $64, BX; \
	MOVQ CX, R11; \
	MOVQ alpha+56(FP), AX; \
	PV4X16(c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone); \
	MOVQ d+24(FP), CX; \
	SHLQ $qshift, CX; \
	ADDQ CX, 0(SP); \
	MOVQ d+24(FP), CX; \
	SHLQ $4, CX; \
	ADDQ CX, 8(SP); \
	ADDQ $16, 16(SP); \
	ADDQ $16, 24(SP); \
	DECQ 32(SP)

// quietBit is a float32's quiet-NaN bit, highHalf the mask of its high 16
// bits (the bfloat16 pairs: pairRowsAVX512, pairPanelAVX512).
DATA quietBit<>+0(SB)/4, $0x00400000
GLOBL quietBit<>(SB), RODATA|NOPTR, $4
DATA highHalf<>+0(SB)/4, $0xffff0000
GLOBL highHalf<>(SB), RODATA|NOPTR, $4

// PAIR_PANEL_VEC(off) is 16 keys of one pair of panel rows (SI, the even
// row; SI+256 the odd) into their 16 words at DI+off: Z31 the quiet bit,
// Z30 highHalf. Clobbers Z0, Z1, K1, K2.
#define PAIR_PANEL_VEC(off) \
	VMOVUPS off(SI), Z0; \
	VMOVUPS (off+256)(SI), Z1; \
	VCMPPS $3, Z0, Z0, K1; \
	VCMPPS $3, Z1, Z1, K2; \
	VPORD Z31, Z0, K1, Z0; \
	VPORD Z31, Z1, K2, Z1; \
	VPSRLD $16, Z0, Z0; \
	VPANDD Z30, Z1, Z1; \
	VPORD Z1, Z0, Z0; \
	VMOVUPS Z0, off(DI)

// The CPU backend's micro-kernels for amd64. Each routine equals the Go loop
// named in its comment (kernels.go), with multiply-adds fused; the Go
// wrappers in kernels_amd64.go check the bounds first.
//
// Layouts: q and acc rows are d floats apart, v rows d floats apart, score
// rows (s, p) panel = 64 floats (256 bytes) apart, kt rows 64 floats apart.

// func scores4x64AVX2(s, q, kt *float32, d int, scale float32)
// Equals scores4Go. Four column blocks of 16 keys; each block keeps 4 rows x
// 16 keys in eight accumulators, fed per i by two kt loads and four q
// broadcasts.
TEXT ·scores4x64AVX2(SB), NOSPLIT, $0-36
	MOVQ s+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	VBROADCASTSS scale+32(FP), Y15
	MOVQ $4, R11

s4avx2_block:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
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
	VMOVUPS Y2, 256(DI)
	VMOVUPS Y3, 288(DI)
	VMOVUPS Y4, 512(DI)
	VMOVUPS Y5, 544(DI)
	VMOVUPS Y6, 768(DI)
	VMOVUPS Y7, 800(DI)
	ADDQ $64, DI
	ADDQ $64, DX
	DECQ R11
	JNZ s4avx2_block
	VZEROUPPER
	RET

// FMA4X4 is the 4×4 block of multiply-adds of the product loops: Z(4r+c)
// += Z(16+c)·Z(20+r) for r, c < 4 (the four loaded vectors Z16-Z19 against
// the four broadcasts Z20-Z23).
#define FMA4X4 \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z17, Z20, Z1; \
	VFMADD231PS Z18, Z20, Z2; \
	VFMADD231PS Z19, Z20, Z3; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z17, Z21, Z5; \
	VFMADD231PS Z18, Z21, Z6; \
	VFMADD231PS Z19, Z21, Z7; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z17, Z22, Z9; \
	VFMADD231PS Z18, Z22, Z10; \
	VFMADD231PS Z19, Z22, Z11; \
	VFMADD231PS Z16, Z23, Z12; \
	VFMADD231PS Z17, Z23, Z13; \
	VFMADD231PS Z18, Z23, Z14; \
	VFMADD231PS Z19, Z23, Z15

// STEP4X4(v0, v1, v2, v3, b0, b1, b2, b3) is one step of the product
// loops: the four vectors at v0-v3 into Z16-Z19, the four floats at b0-b3
// broadcast into Z20-Z23, then FMA4X4.
#define STEP4X4(v0, v1, v2, v3, b0, b1, b2, b3) \
	VMOVUPS v0, Z16; \
	VMOVUPS v1, Z17; \
	VMOVUPS v2, Z18; \
	VMOVUPS v3, Z19; \
	VBROADCASTSS b0, Z20; \
	VBROADCASTSS b1, Z21; \
	VBROADCASTSS b2, Z22; \
	VBROADCASTSS b3, Z23; \
	FMA4X4

// SCORES4X64(pairs, loop, done) is the body of scores4x64AVX512 up to its stores:
// the sixteen accumulators Z0-Z15 (row r's 64 keys in Z4r..Z4r+3) of the
// four q rows against the kt panel, the dot products not yet scaled
// (arguments s, q, kt, d, scale at 0-32(FP)); pairs, loop and done name its
// labels, done its end. It clobbers Z16-Z23, CX, DX, SI and R8-R10, and
// leaves s in DI.
#define SCORES4X64(pairs, loop, done) \
	MOVQ s+0(FP), DI; \
	MOVQ q+8(FP), SI; \
	MOVQ kt+16(FP), DX; \
	MOVQ d+24(FP), CX; \
	SCORES4X64_REGS(pairs, loop, done)

// ZERO_Z0_Z15 clears the 16 accumulators of the 4-row score kernels.
#define ZERO_Z0_Z15 \
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; VPXORD Z9, Z9, Z9; VPXORD Z10, Z10, Z10; VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; VPXORD Z13, Z13, Z13; VPXORD Z14, Z14, Z14; VPXORD Z15, Z15, Z15

// SCORES4X64_REGS(pairs, loop, done) is SCORES4X64 with q in SI, kt in DX and
// d in CX already. An odd d's first column
// runs alone; the rest run two a trip, the four q rows addressed from their
// ends by one negative index (CX, bytes), so that a trip of 32 multiply-adds
// carries three scalar operations (not the twelve of two one-column trips)
// to compete for the FMA ports.
#define SCORES4X64_REGS(pairs, loop, done) \
	LEAQ (SI)(CX*4), R8; \
	LEAQ (R8)(CX*4), R9; \
	LEAQ (R9)(CX*4), R10; \
	ZERO_Z0_Z15; \
	TESTQ CX, CX; \
	JZ done; \
	TESTQ $1, CX; \
	JZ pairs; \
	STEP4X4(0(DX), 64(DX), 128(DX), 192(DX), (SI), (R8), (R9), (R10)); \
	ADDQ $256, DX; \
	ADDQ $4, SI; \
	ADDQ $4, R8; \
	ADDQ $4, R9; \
	ADDQ $4, R10; \
	DECQ CX; \
	JZ done; \
pairs: \
	LEAQ (SI)(CX*4), SI; \
	LEAQ (R8)(CX*4), R8; \
	LEAQ (R9)(CX*4), R9; \
	LEAQ (R10)(CX*4), R10; \
	SHLQ $2, CX; \
	NEGQ CX; \
loop: \
	STEP4X4(0(DX), 64(DX), 128(DX), 192(DX), (SI)(CX*1), (R8)(CX*1), (R9)(CX*1), (R10)(CX*1)); \
	STEP4X4(256(DX), 320(DX), 384(DX), 448(DX), 4(SI)(CX*1), 4(R8)(CX*1), 4(R9)(CX*1), 4(R10)(CX*1)); \
	ADDQ $512, DX; \
	ADDQ $8, CX; \
	JNZ loop; \
done:

// SCALE16 multiplies the sixteen accumulators Z0-Z15 by the scale at
// scale+32(FP), through Z20.
#define SCALE16 \
	VBROADCASTSS scale+32(FP), Z20; \
	VMULPS Z20, Z0, Z0; \
	VMULPS Z20, Z1, Z1; \
	VMULPS Z20, Z2, Z2; \
	VMULPS Z20, Z3, Z3; \
	VMULPS Z20, Z4, Z4; \
	VMULPS Z20, Z5, Z5; \
	VMULPS Z20, Z6, Z6; \
	VMULPS Z20, Z7, Z7; \
	VMULPS Z20, Z8, Z8; \
	VMULPS Z20, Z9, Z9; \
	VMULPS Z20, Z10, Z10; \
	VMULPS Z20, Z11, Z11; \
	VMULPS Z20, Z12, Z12; \
	VMULPS Z20, Z13, Z13; \
	VMULPS Z20, Z14, Z14; \
	VMULPS Z20, Z15, Z15

// func scores4x64AVX512(s, q, kt *float32, d int, scale float32)
// Equals scores4Go. All 4 rows x 64 keys in sixteen accumulators, fed per i
// by four kt loads and four q broadcasts.
TEXT ·scores4x64AVX512(SB), NOSPLIT, $0-36
	SCORES4X64(s4avx512_pairs, s4avx512_loop, s4avx512_dots)
	SCALE16
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VMOVUPS Z8, 512(DI)
	VMOVUPS Z9, 576(DI)
	VMOVUPS Z10, 640(DI)
	VMOVUPS Z11, 704(DI)
	VMOVUPS Z12, 768(DI)
	VMOVUPS Z13, 832(DI)
	VMOVUPS Z14, 896(DI)
	VMOVUPS Z15, 960(DI)
	VZEROUPPER
	RET

// func pv4x8AVX2(acc, p, v *float32, d, n, cols int, alpha *[4]float32)
// Equals pv4Go on columns [0, cols). Blocks of 16 columns keep 4 rows x 16
// columns in eight accumulators (two v loads, four p broadcasts per key);
// a last block of 8 columns uses four.
TEXT ·pv4x8AVX2(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ d+24(FP), CX
	MOVQ n+32(FP), BX
	MOVQ cols+40(FP), R11
	MOVQ alpha+48(FP), AX
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
	VBROADCASTSS 256(R12), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS 512(R12), Y10
	VFMADD231PS Y8, Y10, Y4
	VFMADD231PS Y9, Y10, Y5
	VBROADCASTSS 768(R12), Y11
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
	VBROADCASTSS 256(R12), Y11
	VFMADD231PS Y8, Y11, Y2
	VBROADCASTSS 512(R12), Y10
	VFMADD231PS Y8, Y10, Y4
	VBROADCASTSS 768(R12), Y11
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

// PV4X16(c64, u64, g64, p64, l64, s64, c16, l16, s16, done) is the body of
// pv4x16AVX512 with acc in DI, p in SI, v in DX, d in CX, n in BX, cols in
// R11 and alpha in AX; the arguments name its labels, done the one it ends
// at. Blocks of 64 columns load acc without the rescale where all four
// alphas are 1 (K5; x·1 = x, so the sums are the same bits), as they are
// after a lazy softmax step; their keys run two a trip, an odd n's first
// alone (three scalar operations a trip of 32 multiply-adds, not six). It
// clobbers Z0-Z27, K5, CX, R8-R13 and advances DI, DX and R11.
#define PV4X16(c64, u64, g64, p64, l64, s64, c16, l16, s16, done) \
	VBROADCASTSS 0(AX), Z24; \
	VBROADCASTSS 4(AX), Z25; \
	VBROADCASTSS 8(AX), Z26; \
	VBROADCASTSS 12(AX), Z27; \
	SHLQ $2, CX; \
	SHLQ $2, R11; \
	LEAQ (DI)(CX*1), R8; \
	LEAQ (R8)(CX*1), R9; \
	LEAQ (R9)(CX*1), R10; \
	KXORW K5, K5, K5; \
	MOVQ $0x3f8000003f800000, R12; \
	CMPQ R12, 0(AX); \
	JNE c64; \
	CMPQ R12, 8(AX); \
	JNE c64; \
	KXNORW K5, K5, K5; \
c64: \
	CMPQ R11, $256; \
	JLT c16; \
	KORTESTW K5, K5; \
	JCS u64; \
	VMULPS 0(DI), Z24, Z0; \
	VMULPS 64(DI), Z24, Z1; \
	VMULPS 128(DI), Z24, Z2; \
	VMULPS 192(DI), Z24, Z3; \
	VMULPS 0(R8), Z25, Z4; \
	VMULPS 64(R8), Z25, Z5; \
	VMULPS 128(R8), Z25, Z6; \
	VMULPS 192(R8), Z25, Z7; \
	VMULPS 0(R9), Z26, Z8; \
	VMULPS 64(R9), Z26, Z9; \
	VMULPS 128(R9), Z26, Z10; \
	VMULPS 192(R9), Z26, Z11; \
	VMULPS 0(R10), Z27, Z12; \
	VMULPS 64(R10), Z27, Z13; \
	VMULPS 128(R10), Z27, Z14; \
	VMULPS 192(R10), Z27, Z15; \
	JMP g64; \
u64: \
	VMOVUPS 0(DI), Z0; \
	VMOVUPS 64(DI), Z1; \
	VMOVUPS 128(DI), Z2; \
	VMOVUPS 192(DI), Z3; \
	VMOVUPS 0(R8), Z4; \
	VMOVUPS 64(R8), Z5; \
	VMOVUPS 128(R8), Z6; \
	VMOVUPS 192(R8), Z7; \
	VMOVUPS 0(R9), Z8; \
	VMOVUPS 64(R9), Z9; \
	VMOVUPS 128(R9), Z10; \
	VMOVUPS 192(R9), Z11; \
	VMOVUPS 0(R10), Z12; \
	VMOVUPS 64(R10), Z13; \
	VMOVUPS 128(R10), Z14; \
	VMOVUPS 192(R10), Z15; \
g64: \
	MOVQ SI, R12; \
	MOVQ DX, R13; \
	MOVQ BX, AX; \
	TESTQ AX, AX; \
	JZ s64; \
	TESTQ $1, AX; \
	JZ p64; \
	STEP4X4((R13), 64(R13), 128(R13), 192(R13), (R12), 256(R12), 512(R12), 768(R12)); \
	ADDQ CX, R13; \
	ADDQ $4, R12; \
	DECQ AX; \
	JZ s64; \
p64: \
	SHRQ $1, AX; \
l64: \
	STEP4X4((R13), 64(R13), 128(R13), 192(R13), (R12), 256(R12), 512(R12), 768(R12)); \
	STEP4X4((R13)(CX*1), 64(R13)(CX*1), 128(R13)(CX*1), 192(R13)(CX*1), 4(R12), 260(R12), 516(R12), 772(R12)); \
	LEAQ (R13)(CX*2), R13; \
	ADDQ $8, R12; \
	DECQ AX; \
	JNZ l64; \
s64: \
	VMOVUPS Z0, 0(DI); \
	VMOVUPS Z1, 64(DI); \
	VMOVUPS Z2, 128(DI); \
	VMOVUPS Z3, 192(DI); \
	VMOVUPS Z4, 0(R8); \
	VMOVUPS Z5, 64(R8); \
	VMOVUPS Z6, 128(R8); \
	VMOVUPS Z7, 192(R8); \
	VMOVUPS Z8, 0(R9); \
	VMOVUPS Z9, 64(R9); \
	VMOVUPS Z10, 128(R9); \
	VMOVUPS Z11, 192(R9); \
	VMOVUPS Z12, 0(R10); \
	VMOVUPS Z13, 64(R10); \
	VMOVUPS Z14, 128(R10); \
	VMOVUPS Z15, 192(R10); \
	ADDQ $256, DI; \
	ADDQ $256, R8; \
	ADDQ $256, R9; \
	ADDQ $256, R10; \
	ADDQ $256, DX; \
	SUBQ $256, R11; \
	JMP c64; \
c16: \
	CMPQ R11, $64; \
	JLT done; \
	VMULPS (DI), Z24, Z0; \
	VMULPS (R8), Z25, Z4; \
	VMULPS (R9), Z26, Z8; \
	VMULPS (R10), Z27, Z12; \
	MOVQ SI, R12; \
	MOVQ DX, R13; \
	MOVQ BX, AX; \
	TESTQ AX, AX; \
	JZ s16; \
l16: \
	VMOVUPS (R13), Z16; \
	VBROADCASTSS (R12), Z20; \
	VBROADCASTSS 256(R12), Z21; \
	VBROADCASTSS 512(R12), Z22; \
	VBROADCASTSS 768(R12), Z23; \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z16, Z23, Z12; \
	ADDQ CX, R13; \
	ADDQ $4, R12; \
	DECQ AX; \
	JNZ l16; \
s16: \
	VMOVUPS Z0, (DI); \
	VMOVUPS Z4, (R8); \
	VMOVUPS Z8, (R9); \
	VMOVUPS Z12, (R10); \
	ADDQ $64, DI; \
	ADDQ $64, R8; \
	ADDQ $64, R9; \
	ADDQ $64, R10; \
	ADDQ $64, DX; \
	SUBQ $64, R11; \
	JMP c16; \
done:

// func pv4x16AVX512(acc, p, v *float32, d, n, cols int, alpha *[4]float32)
// Equals pv4Go on columns [0, cols). Blocks of 64 columns keep 4 rows x 64
// columns in sixteen accumulators (four v loads, four p broadcasts per key);
// then blocks of 16 columns use four.
TEXT ·pv4x16AVX512(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ d+24(FP), CX
	MOVQ n+32(FP), BX
	MOVQ cols+40(FP), R11
	MOVQ alpha+48(FP), AX
	PV4X16(pv4avx512_c64, pv4avx512_u64, pv4avx512_g64, pv4avx512_p64, pv4avx512_l64, pv4avx512_s64, pv4avx512_c16, pv4avx512_l16, pv4avx512_s16, pv4avx512_done)
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

// func pv1x16AVX512(acc, p, v *float32, d, n, cols int, alpha float32)
// Equals pv1Go on columns [0, cols): blocks of 64 columns in four
// accumulators, then blocks of 16 in one.
TEXT ·pv1x16AVX512(SB), NOSPLIT, $0-52
	MOVQ acc+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ d+24(FP), CX
	MOVQ n+32(FP), BX
	MOVQ cols+40(FP), R11
	VBROADCASTSS alpha+48(FP), Z15
	SHLQ $2, CX
	SHLQ $2, R11

pv1avx512_c64:
	CMPQ R11, $256
	JLT pv1avx512_c16
	VMULPS (DI), Z15, Z0
	VMULPS 64(DI), Z15, Z1
	VMULPS 128(DI), Z15, Z2
	VMULPS 192(DI), Z15, Z3
	MOVQ SI, R12
	MOVQ DX, R13
	MOVQ BX, AX
	TESTQ AX, AX
	JZ pv1avx512_s64

pv1avx512_l64:
	VBROADCASTSS (R12), Z8
	VFMADD231PS (R13), Z8, Z0
	VFMADD231PS 64(R13), Z8, Z1
	VFMADD231PS 128(R13), Z8, Z2
	VFMADD231PS 192(R13), Z8, Z3
	ADDQ CX, R13
	ADDQ $4, R12
	DECQ AX
	JNZ pv1avx512_l64

pv1avx512_s64:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ $256, DI
	ADDQ $256, DX
	SUBQ $256, R11
	JMP pv1avx512_c64

pv1avx512_c16:
	CMPQ R11, $64
	JLT pv1avx512_done
	VMULPS (DI), Z15, Z0
	MOVQ SI, R12
	MOVQ DX, R13
	MOVQ BX, AX
	TESTQ AX, AX
	JZ pv1avx512_s16

pv1avx512_l16:
	VBROADCASTSS (R12), Z8
	VFMADD231PS (R13), Z8, Z0
	ADDQ CX, R13
	ADDQ $4, R12
	DECQ AX
	JNZ pv1avx512_l16

pv1avx512_s16:
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $64, R11
	JMP pv1avx512_c16

pv1avx512_done:
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
	MOVL $0x3fb8aa3b, AX // log2e
	VMOVD AX, X14
	VBROADCASTSS X14, Y14
	MOVL $0x3f318000, AX // ln2 high part
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	MOVL $0xb95e8083, AX // ln2 low part
	VMOVD AX, X12
	VBROADCASTSS X12, Y12
	MOVL $0x3ab60b61, AX // 1/720
	VMOVD AX, X11
	VBROADCASTSS X11, Y11
	MOVL $0x3c088889, AX // 1/120
	VMOVD AX, X10
	VBROADCASTSS X10, Y10
	MOVL $0x3d2aaaab, AX // 1/24
	VMOVD AX, X9
	VBROADCASTSS X9, Y9
	MOVL $0x3e2aaaab, AX // 1/6
	VMOVD AX, X8
	VBROADCASTSS X8, Y8
	MOVL $0x3f000000, AX // 1/2
	VMOVD AX, X7
	VBROADCASTSS X7, Y7
	MOVL $0x3f800000, AX // 1
	VMOVD AX, X6
	VBROADCASTSS X6, Y6
	MOVL $0xc2aeac4f, AX // -87.33654
	VMOVD AX, X5
	VBROADCASTSS X5, Y5
	VXORPS Y4, Y4, Y4

expsum8avx2_loop:
	VMOVUPS (SI), Y0
	VSUBPS Y15, Y0, Y0
	VCMPPS $1, Y5, Y0, Y1
	VMAXPS Y0, Y5, Y0
	VMULPS Y14, Y0, Y2
	VROUNDPS $0, Y2, Y2
	VMOVAPS Y0, Y3
	VFNMADD231PS Y13, Y2, Y3
	VFNMADD231PS Y12, Y2, Y3
	VMOVAPS Y11, Y0
	VFMADD213PS Y10, Y3, Y0
	VFMADD213PS Y9, Y3, Y0
	VFMADD213PS Y8, Y3, Y0
	VFMADD213PS Y7, Y3, Y0
	VFMADD213PS Y6, Y3, Y0
	VFMADD213PS Y6, Y3, Y0
	VCVTPS2DQ Y2, Y2
	VPSLLD $23, Y2, Y2
	VPADDD Y6, Y2, Y2
	VMULPS Y2, Y0, Y0
	VANDNPS Y0, Y1, Y0
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

// func max16AVX512(s *float32, n int) float32
// Equals rowMaxGo on s[:n], any n >= 0: a running maximum in 16 lanes (the
// last partial vector loaded under a mask, its other lanes keeping the
// running maximum), then across them; NaN is tracked in a mask register,
// since VMAXPS alone would drop it.
TEXT ·max16AVX512(SB), NOSPLIT, $0-20
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0
	KXORW K2, K2, K2

max16_loop:
	CMPQ CX, $16
	JLT max16_tail
	VMOVUPS (SI), Z1
	VMAXPS Z1, Z0, Z0
	VCMPPS $3, Z1, Z1, K1
	KORW K1, K2, K2
	ADDQ $64, SI
	SUBQ $16, CX
	JMP max16_loop

max16_tail:
	TESTQ CX, CX
	JZ max16_reduce
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVAPS Z0, Z1
	VMOVUPS (SI), K1, Z1
	VMAXPS Z1, Z0, Z0
	VCMPPS $3, Z1, Z1, K3
	KORW K3, K2, K2

max16_reduce:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	KORTESTW K2, K2
	JEQ max16_store
	MOVL $0x7fc00000, AX
	VMOVD AX, X0

max16_store:
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func expSum16AVX512(s *float32, n int, m float32) float32
// Equals expSum2Go on s[:n], any n >= 0, 16 lanes at a time (the last
// partial vector under a mask): EXP16 (2^x) of x = s-m. The sum is taken in 16
// lanes and then across them.
TEXT ·expSum16AVX512(SB), NOSPLIT, $0-28
	MOVQ s+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Z31
	EXP16_CONSTANTS
	VPXORD Z20, Z20, Z20

expsum16_loop:
	CMPQ CX, $16
	JLT expsum16_tail
	VMOVUPS (SI), Z0
	VSUBPS Z31, Z0, Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS Z0, (SI)
	VADDPS Z0, Z20, Z20
	ADDQ $64, SI
	SUBQ $16, CX
	JMP expsum16_loop

expsum16_tail:
	TESTQ CX, CX
	JZ expsum16_reduce
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z0
	VSUBPS Z31, Z0, Z0
	EXP16(Z0, Z1, Z2)
	VMOVUPS Z0, K1, (SI)
	VADDPS Z0, Z20, K1, Z20

expsum16_reduce:
	VMOVAPS Z20, Z4
	VEXTRACTF64X4 $1, Z4, Y0
	VADDPS Y0, Y4, Y4
	VEXTRACTF128 $1, Y4, X0
	VADDPS X0, X4, X4
	VPERMILPS $0x4e, X4, X0
	VADDPS X0, X4, X4
	VPERMILPS $0xb1, X4, X0
	VADDPS X0, X4, X4
	VMOVSS X4, ret+24(FP)
	VZEROUPPER
	RET

// func scoresSoftmax4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32)
// Equals softmax4Go on the dot products of scores4x64AVX512 (the
// online-softmax step of attendRows on four full rows of 64 scores, the
// scale folded into the exponentials' arguments), with the products kept in
// registers between the two: the products, then the four rows' maxima lane
// by lane, the lazy test, in the slow case the maxima reduced together and
// the four rescale factors in one vector exponential, each row's
// exponentials, the four sums reduced together, and l. Sums are taken in
// another order than softmax4Go's, and a row with a NaN score gets a NaN
// sum without a NaN maximum (the contract of kernelSet.scoresSoftmax4).
// alpha[4:8] is scratch.
TEXT ·scoresSoftmax4x64AVX512(SB), NOSPLIT, $0-64
	SCORES4X64(ss4_pairs, ss4_loop, ss4_dots)
	VBROADCASTSS scale+32(FP), Z27
	MOVQ m+40(FP), R11
	MOVQ l+48(FP), R12
	MOVQ alpha+56(FP), R13
	SOFTMAX4X64(ss4_slow, ss4_rows)
	VZEROUPPER
	RET

// PREFETCH_STREAM(addr, lines, loop, done, op) prefetches, with op on
// (BX), the 64-byte lines [addr, addr + 64·lines), both words at the given
// offsets from AX, and advances the address past them. Clobbers BX, CX.
#define PREFETCH_STREAM(addr, lines, loop, done, op) \
	MOVQ lines(AX), CX \
	TESTQ CX, CX \
	JZ done \
	MOVQ addr(AX), BX \
loop: \
	op \
	ADDQ $64, BX \
	DECQ CX \
	JNZ loop \
	MOVQ BX, addr(AX) \
done:

// PREFETCH5 runs one group's share of the prefetch plan at AX
// (prefetchPlan, [10]uintptr: five streams of {address, lines}, three read
// into L2 with PREFETCHT1, then two brought into L1 for writing with
// PREFETCHW, encoded as bytes since the Go assembler lacks it); the
// arguments are the labels. Clobbers BX, CX.
#define PREFETCH5(l0, d0, l1, d1, l2, d2, l3, d3, l4, d4) \
	PREFETCH_STREAM(0, 8, l0, d0, PREFETCHT1 (BX)) \
	PREFETCH_STREAM(16, 24, l1, d1, PREFETCHT1 (BX)) \
	PREFETCH_STREAM(32, 40, l2, d2, PREFETCHT1 (BX)) \
	PREFETCH_STREAM(48, 56, l3, d3, BYTE $0x0F; BYTE $0x0D; BYTE $0x0B) \
	PREFETCH_STREAM(64, 72, l4, d4, BYTE $0x0F; BYTE $0x0D; BYTE $0x0B)

// func steps4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr)
// Equals, for each of groups groups of four query rows (q, acc, m and l
// advancing by four rows a group), scoresSoftmax4x64AVX512 followed by
// pv4x16AVX512 on all 64 keys and all d columns (d a positive multiple of
// 16): one call for a panel's run of full groups instead of two a group.
// Each group first prefetches its share of pf's streams (PREFETCH5, which
// changes no result). The locals hold the group's q, acc, m and l and the
// groups left.
TEXT ·steps4x64AVX512(SB), NOSPLIT, $40-96
	STEPS_ENTRY

steps_group:
	MOVQ pf+88(FP), AX
	PREFETCH5(steps_pl0, steps_pd0, steps_pl1, steps_pd1, steps_pl2, steps_pd2, steps_pl3, steps_pd3, steps_pl4, steps_pd4)
	MOVQ s+0(FP), DI
	MOVQ 0(SP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	SCORES4X64_REGS(steps_spairs, steps_sloop, steps_sdone)
	STEPS_REST(4, steps_slow, steps_rows, steps_c64, steps_u64, steps_g64, steps_p64, steps_l64, steps_s64, steps_c16, steps_l16, steps_s16, steps_pvdone)
	JNZ steps_group
	VZEROUPPER
	RET

// VDPBF16PS_BCST(dst, src, base, disp) is VDPBF16PS with the bfloat16 pair
// at disp·4(base)(CX*1) broadcast ({1to16}): for each lane i, Z(dst)[i] +=
// Z(src)'s pair i · the broadcast pair, the odd element's product first,
// each addition rounded to nearest even (DAZ and FTZ, MXCSR not read).
// dst is one of Z0-Z15, src one of Z16-Z31 and base a general register
// number below 16 other than SP, BP, R12 and R13 (SI is 6, R8-R10 are 8-10);
// disp is a signed byte. Written as bytes, since the Go assembler lacks the
// instruction (EVEX.512.F3.0F38.W0 52 /r, m32bcst, disp8·4; checked against
// GNU as 2.40's encoding of each form used here).
#define VDPBF16PS_BCST(dst, src, base, disp) \
	BYTE $0x62; \
	BYTE $(0x52 | ((8-((dst)&8))<<4) | ((8-((base)&8))<<2)); \
	BYTE $(0x06 | ((15-((src)&15))<<3)); \
	BYTE $0x50; \
	BYTE $0x52; \
	BYTE $(0x44 | (((dst)&7)<<3)); \
	BYTE $(0x08 | ((base)&7)); \
	BYTE $(disp)

// DP4X4(disp) is FMA4X4 on bfloat16 pairs: Z(4r+c) += Z(16+c)'s pairs ·
// the pair at disp·4 bytes past row r's (SI, R8, R9, R10) index CX,
// broadcast, for r, c < 4.
#define DP4X4(disp) \
	VDPBF16PS_BCST(0, 16, 6, disp); \
	VDPBF16PS_BCST(1, 17, 6, disp); \
	VDPBF16PS_BCST(2, 18, 6, disp); \
	VDPBF16PS_BCST(3, 19, 6, disp); \
	VDPBF16PS_BCST(4, 16, 8, disp); \
	VDPBF16PS_BCST(5, 17, 8, disp); \
	VDPBF16PS_BCST(6, 18, 8, disp); \
	VDPBF16PS_BCST(7, 19, 8, disp); \
	VDPBF16PS_BCST(8, 16, 9, disp); \
	VDPBF16PS_BCST(9, 17, 9, disp); \
	VDPBF16PS_BCST(10, 18, 9, disp); \
	VDPBF16PS_BCST(11, 19, 9, disp); \
	VDPBF16PS_BCST(12, 16, 10, disp); \
	VDPBF16PS_BCST(13, 17, 10, disp); \
	VDPBF16PS_BCST(14, 18, 10, disp); \
	VDPBF16PS_BCST(15, 19, 10, disp)

// SCORES4X64_PAIRS_REGS(loop) is SCORES4X64_REGS on bfloat16 pairs
// (scores4PairsGo): q in SI holds four rows of d bfloat16 (2d bytes apart),
// kt in DX the panel's d/2 rows of 64 key pairs (256 bytes each), d in CX
// a positive multiple of 4. Two pairs a trip: 32 VDPBF16PS, each two
// multiply-adds a lane, against three scalar operations. Clobbers Z16-Z19,
// CX, DX, SI and R8-R10.
#define SCORES4X64_PAIRS_REGS(loop) \
	LEAQ (SI)(CX*2), R8; \
	LEAQ (R8)(CX*2), R9; \
	LEAQ (R9)(CX*2), R10; \
	LEAQ (R10)(CX*2), R11; \
	ZERO_Z0_Z15; \
	MOVQ R8, SI; \
	MOVQ R9, R8; \
	MOVQ R10, R9; \
	MOVQ R11, R10; \
	SHLQ $1, CX; \
	NEGQ CX; \
loop: \
	VMOVUPS 0(DX), Z16; \
	VMOVUPS 64(DX), Z17; \
	VMOVUPS 128(DX), Z18; \
	VMOVUPS 192(DX), Z19; \
	DP4X4(0); \
	VMOVUPS 256(DX), Z16; \
	VMOVUPS 320(DX), Z17; \
	VMOVUPS 384(DX), Z18; \
	VMOVUPS 448(DX), Z19; \
	DP4X4(1); \
	ADDQ $512, DX; \
	ADDQ $8, CX; \
	JNZ loop

// func steps4x64PairsAVX512(s *float32, q, kt *uint32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr)
// Equals steps4x64AVX512 with the dot products taken on bfloat16 pairs
// (SCORES4X64_PAIRS_REGS): q holds the groups' rows as pairRowsGo writes
// them (2d bytes a row), kt the panel as pairPanelGo does; d a positive
// multiple of 16. Needs AVX512_BF16.
TEXT ·steps4x64PairsAVX512(SB), NOSPLIT, $40-96
	STEPS_ENTRY

pairs_group:
	MOVQ pf+88(FP), AX
	PREFETCH5(pairs_pl0, pairs_pd0, pairs_pl1, pairs_pd1, pairs_pl2, pairs_pd2, pairs_pl3, pairs_pd3, pairs_pl4, pairs_pd4)
	MOVQ 0(SP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	SCORES4X64_PAIRS_REGS(pairs_sloop)
	MOVQ s+0(FP), DI
	STEPS_REST(3, pairs_slow, pairs_rows, pairs_c64, pairs_u64, pairs_g64, pairs_p64, pairs_l64, pairs_s64, pairs_c16, pairs_l16, pairs_s16, pairs_pvdone)
	JNZ pairs_group
	VZEROUPPER
	RET

// func pairRowsAVX512(dst *uint32, src *float32, n int)
// Equals pairRowsGo on n pairs (n a positive multiple of 8): each float's
// high half, a NaN's quiet bit set first, two floats to a 32-bit word:
// VPSRLD and VPMOVDW on 16 floats at a time.
TEXT ·pairRowsAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	VPBROADCASTD quietBit<>(SB), Z31

pairrows_loop:
	VMOVUPS (SI), Z0
	VCMPPS $3, Z0, Z0, K1
	VPORD Z31, Z0, K1, Z0
	VPSRLD $16, Z0, Z0
	VPMOVDW Z0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ pairrows_loop
	VZEROUPPER
	RET

// func pairPanelAVX512(dst *uint32, kt *float32, pairs int)
// Equals pairPanelGo on a panel of 2·pairs rows (pairs > 0): for each pair
// of panel rows, a word per key of both rows' high halves (NaNs quieted
// first): the even row's shifted down, the odd row's masked.
TEXT ·pairPanelAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ kt+8(FP), SI
	MOVQ pairs+16(FP), CX
	VPBROADCASTD quietBit<>(SB), Z31
	VPBROADCASTD highHalf<>(SB), Z30

pairpanel_loop:
	PAIR_PANEL_VEC(0)
	PAIR_PANEL_VEC(64)
	PAIR_PANEL_VEC(128)
	PAIR_PANEL_VEC(192)
	ADDQ $512, SI
	ADDQ $256, DI
	DECQ CX
	JNZ pairpanel_loop
	VZEROUPPER
	RET

// func softmax4x64AVX512(s *float32, scale float32, m, l, alpha *float32)
// Equals scoresSoftmax4x64AVX512 on dot products already in s (four rows
// of panel): the same softmax step (SOFTMAX4X64), weights written back
// into s.
TEXT ·softmax4x64AVX512(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), DI
	MOVQ m+16(FP), R11
	MOVQ l+24(FP), R12
	MOVQ alpha+32(FP), R13
	VBROADCASTSS scale+8(FP), Z27
	LOAD4X64
	SOFTMAX4X64(sm4_slow, sm4_rows)
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

// func scaleRows16AVX512(dst *float32, stride int, src *float32, d int, f *float32, rows int)
// Equals scaleRowsGo: each row's d floats of src, 64 then 16 at a time and
// the last d%16 under a mask, times the row's f, stored at its row of dst.
TEXT ·scaleRows16AVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ stride+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ d+24(FP), CX
	MOVQ f+32(FP), DX
	MOVQ rows+40(FP), BX
	// K1: the low d%16 lanes.
	MOVQ CX, R12
	ANDQ $15, CX
	MOVL $1, R9
	SHLL CX, R9
	DECL R9
	KMOVW R9, K1
	MOVQ R12, CX

sr16_row:
	VBROADCASTSS (DX), Z15
	MOVQ DI, R10
	MOVQ CX, R11

sr16_c64:
	CMPQ R11, $64
	JLT sr16_c16
	VMULPS (SI), Z15, Z0
	VMULPS 64(SI), Z15, Z1
	VMULPS 128(SI), Z15, Z2
	VMULPS 192(SI), Z15, Z3
	VMOVUPS Z0, (R10)
	VMOVUPS Z1, 64(R10)
	VMOVUPS Z2, 128(R10)
	VMOVUPS Z3, 192(R10)
	ADDQ $256, SI
	ADDQ $256, R10
	SUBQ $64, R11
	JMP sr16_c64

sr16_c16:
	CMPQ R11, $16
	JLT sr16_tail
	VMULPS (SI), Z15, Z0
	VMOVUPS Z0, (R10)
	ADDQ $64, SI
	ADDQ $64, R10
	SUBQ $16, R11
	JMP sr16_c16

sr16_tail:
	TESTQ R11, R11
	JZ sr16_next
	VMOVUPS.Z (SI), K1, Z0
	VMULPS Z0, Z15, Z0
	VMOVUPS Z0, K1, (R10)
	LEAQ (SI)(R11*4), SI

sr16_next:
	ADDQ R8, DI
	ADDQ $4, DX
	DECQ BX
	JNZ sr16_row
	VZEROUPPER
	RET

// func transpose16AVX512(kt, k *float32, d, keyBlocks, dimBlocks int)
// Equals, for keys j < 16·keyBlocks and dims i < 16·dimBlocks:
// kt[i*panel+j] = k[j*d+i] (d in floats): blocks of 16 keys × 16 dims,
// each sixteen row loads, a network of 64 shuffles (pairs of rows
// interleaved by 32 then 64 bits, then 128-bit quarters twice), and
// sixteen stores of 16 keys, 256 bytes apart.
TEXT ·transpose16AVX512(SB), NOSPLIT, $0-40
	MOVQ kt+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ d+16(FP), CX
	SHLQ $2, CX
	MOVQ keyBlocks+24(FP), BX
	TESTQ BX, BX
	JZ t16_done

t16_keys:
	MOVQ dimBlocks+32(FP), AX
	TESTQ AX, AX
	JZ t16_next
	MOVQ SI, R8
	MOVQ DI, R9

t16_dims:
	MOVQ R8, R10
	VMOVUPS (R10), Z0
	ADDQ CX, R10
	VMOVUPS (R10), Z1
	ADDQ CX, R10
	VMOVUPS (R10), Z2
	ADDQ CX, R10
	VMOVUPS (R10), Z3
	ADDQ CX, R10
	VMOVUPS (R10), Z4
	ADDQ CX, R10
	VMOVUPS (R10), Z5
	ADDQ CX, R10
	VMOVUPS (R10), Z6
	ADDQ CX, R10
	VMOVUPS (R10), Z7
	ADDQ CX, R10
	VMOVUPS (R10), Z8
	ADDQ CX, R10
	VMOVUPS (R10), Z9
	ADDQ CX, R10
	VMOVUPS (R10), Z10
	ADDQ CX, R10
	VMOVUPS (R10), Z11
	ADDQ CX, R10
	VMOVUPS (R10), Z12
	ADDQ CX, R10
	VMOVUPS (R10), Z13
	ADDQ CX, R10
	VMOVUPS (R10), Z14
	ADDQ CX, R10
	VMOVUPS (R10), Z15
	VUNPCKLPS Z1, Z0, Z16
	VUNPCKHPS Z1, Z0, Z17
	VUNPCKLPS Z3, Z2, Z18
	VUNPCKHPS Z3, Z2, Z19
	VUNPCKLPS Z5, Z4, Z20
	VUNPCKHPS Z5, Z4, Z21
	VUNPCKLPS Z7, Z6, Z22
	VUNPCKHPS Z7, Z6, Z23
	VUNPCKLPS Z9, Z8, Z24
	VUNPCKHPS Z9, Z8, Z25
	VUNPCKLPS Z11, Z10, Z26
	VUNPCKHPS Z11, Z10, Z27
	VUNPCKLPS Z13, Z12, Z28
	VUNPCKHPS Z13, Z12, Z29
	VUNPCKLPS Z15, Z14, Z30
	VUNPCKHPS Z15, Z14, Z31
	VUNPCKLPD Z18, Z16, Z0
	VUNPCKHPD Z18, Z16, Z1
	VUNPCKLPD Z19, Z17, Z2
	VUNPCKHPD Z19, Z17, Z3
	VUNPCKLPD Z22, Z20, Z4
	VUNPCKHPD Z22, Z20, Z5
	VUNPCKLPD Z23, Z21, Z6
	VUNPCKHPD Z23, Z21, Z7
	VUNPCKLPD Z26, Z24, Z8
	VUNPCKHPD Z26, Z24, Z9
	VUNPCKLPD Z27, Z25, Z10
	VUNPCKHPD Z27, Z25, Z11
	VUNPCKLPD Z30, Z28, Z12
	VUNPCKHPD Z30, Z28, Z13
	VUNPCKLPD Z31, Z29, Z14
	VUNPCKHPD Z31, Z29, Z15
	VSHUFF32X4 $0x88, Z4, Z0, Z16
	VSHUFF32X4 $0xdd, Z4, Z0, Z20
	VSHUFF32X4 $0x88, Z5, Z1, Z17
	VSHUFF32X4 $0xdd, Z5, Z1, Z21
	VSHUFF32X4 $0x88, Z6, Z2, Z18
	VSHUFF32X4 $0xdd, Z6, Z2, Z22
	VSHUFF32X4 $0x88, Z7, Z3, Z19
	VSHUFF32X4 $0xdd, Z7, Z3, Z23
	VSHUFF32X4 $0x88, Z12, Z8, Z24
	VSHUFF32X4 $0xdd, Z12, Z8, Z28
	VSHUFF32X4 $0x88, Z13, Z9, Z25
	VSHUFF32X4 $0xdd, Z13, Z9, Z29
	VSHUFF32X4 $0x88, Z14, Z10, Z26
	VSHUFF32X4 $0xdd, Z14, Z10, Z30
	VSHUFF32X4 $0x88, Z15, Z11, Z27
	VSHUFF32X4 $0xdd, Z15, Z11, Z31
	VSHUFF32X4 $0x88, Z24, Z16, Z0
	VSHUFF32X4 $0xdd, Z24, Z16, Z1
	VSHUFF32X4 $0x88, Z25, Z17, Z2
	VSHUFF32X4 $0xdd, Z25, Z17, Z3
	VSHUFF32X4 $0x88, Z26, Z18, Z4
	VSHUFF32X4 $0xdd, Z26, Z18, Z5
	VSHUFF32X4 $0x88, Z27, Z19, Z6
	VSHUFF32X4 $0xdd, Z27, Z19, Z7
	VSHUFF32X4 $0x88, Z28, Z20, Z8
	VSHUFF32X4 $0xdd, Z28, Z20, Z9
	VSHUFF32X4 $0x88, Z29, Z21, Z10
	VSHUFF32X4 $0xdd, Z29, Z21, Z11
	VSHUFF32X4 $0x88, Z30, Z22, Z12
	VSHUFF32X4 $0xdd, Z30, Z22, Z13
	VSHUFF32X4 $0x88, Z31, Z23, Z14
	VSHUFF32X4 $0xdd, Z31, Z23, Z15
	VMOVUPS Z0, 0(R9)
	VMOVUPS Z1, 2048(R9)
	VMOVUPS Z2, 256(R9)
	VMOVUPS Z3, 2304(R9)
	VMOVUPS Z4, 512(R9)
	VMOVUPS Z5, 2560(R9)
	VMOVUPS Z6, 768(R9)
	VMOVUPS Z7, 2816(R9)
	VMOVUPS Z8, 1024(R9)
	VMOVUPS Z9, 3072(R9)
	VMOVUPS Z10, 1280(R9)
	VMOVUPS Z11, 3328(R9)
	VMOVUPS Z12, 1536(R9)
	VMOVUPS Z13, 3584(R9)
	VMOVUPS Z14, 1792(R9)
	VMOVUPS Z15, 3840(R9)
	ADDQ $64, R8
	ADDQ $4096, R9
	DECQ AX
	JNZ t16_dims

t16_next:
	MOVQ CX, R11
	SHLQ $4, R11
	ADDQ R11, SI
	ADDQ $64, DI
	DECQ BX
	JNZ t16_keys

t16_done:
	VZEROUPPER
	RET

// func fmaPeakAVX512(n int)
// The core's peak rate of 16-wide fused multiply-adds, for
// BenchmarkPeakFMA: n iterations of 24 independent VFMADD231PS on
// registers (768 flops an iteration), enough chains to cover the latency of
// two FMA ports. Nothing is stored; the Go loop it stands for does nothing.
TEXT ·fmaPeakAVX512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	TESTQ CX, CX
	JZ fmapeak512_done

fmapeak512_loop:
	VFMADD231PS Z24, Z25, Z0
	VFMADD231PS Z24, Z25, Z1
	VFMADD231PS Z24, Z25, Z2
	VFMADD231PS Z24, Z25, Z3
	VFMADD231PS Z24, Z25, Z4
	VFMADD231PS Z24, Z25, Z5
	VFMADD231PS Z24, Z25, Z6
	VFMADD231PS Z24, Z25, Z7
	VFMADD231PS Z24, Z25, Z8
	VFMADD231PS Z24, Z25, Z9
	VFMADD231PS Z24, Z25, Z10
	VFMADD231PS Z24, Z25, Z11
	VFMADD231PS Z24, Z25, Z12
	VFMADD231PS Z24, Z25, Z13
	VFMADD231PS Z24, Z25, Z14
	VFMADD231PS Z24, Z25, Z15
	VFMADD231PS Z24, Z25, Z16
	VFMADD231PS Z24, Z25, Z17
	VFMADD231PS Z24, Z25, Z18
	VFMADD231PS Z24, Z25, Z19
	VFMADD231PS Z24, Z25, Z20
	VFMADD231PS Z24, Z25, Z21
	VFMADD231PS Z24, Z25, Z22
	VFMADD231PS Z24, Z25, Z23
	DECQ CX
	JNZ fmapeak512_loop

fmapeak512_done:
	VZEROUPPER
	RET

// func fmaPeakAVX2(n int)
// fmaPeakAVX512 with 8-wide AVX2 FMAs: 12 chains, 192 flops an iteration.
TEXT ·fmaPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
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
