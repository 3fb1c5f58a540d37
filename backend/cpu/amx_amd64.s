//go:build !purego

#include "textflag.h"
#include "softmax_amd64.h"

// The AMX path's kernels (amx.go says what each computes; the Go loops
// there are their references). The tile instructions are written as bytes,
// since the Go assembler has no AMX mnemonics; each macro names the
// instruction and its operands as GNU as writes them.

// amxCfg is the tile configuration: palette 1, tiles 0-7 of 16 rows × 64
// bytes (16 float32, or 32 bfloat16, a row).
DATA amxCfg<>+0(SB)/8, $1
DATA amxCfg<>+8(SB)/8, $0
DATA amxCfg<>+16(SB)/8, $0x0040004000400040
DATA amxCfg<>+24(SB)/8, $0x0040004000400040
DATA amxCfg<>+32(SB)/8, $0
DATA amxCfg<>+40(SB)/8, $0
DATA amxCfg<>+48(SB)/8, $0x1010101010101010
DATA amxCfg<>+56(SB)/8, $0
GLOBL amxCfg<>(SB), RODATA|NOPTR, $64

// ldtilecfg [rax]
#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
// tilerelease
#define TILERELEASE BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
// tilezero tmm<t>
#define TILEZERO(t) BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $(0xc0|((t)<<3))
// tileloadd tmm<t>, [rsi+rdx*1]
#define TILELOAD_SI_DX(t) BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $(0x04|((t)<<3)); BYTE $0x16
// tileloadd tmm<t>, [rbx+rcx*1]
#define TILELOAD_BX_CX(t) BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $(0x04|((t)<<3)); BYTE $0x0b
// tileloadd tmm<t>, [rbx+rcx*1+disp32]
#define TILELOAD_BX_CX_D(t, disp) BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $(0x84|((t)<<3)); BYTE $0x0b; LONG $(disp)
// tilestored [rdi+rax*1], tmm<t>
#define TILESTORE_DI_AX(t) BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $(0x04|((t)<<3)); BYTE $0x07
// tdpbf16ps tmm<c>, tmm<a>, tmm<b>: C += A·B (A 16 rows × 32 bfloat16, B 16
// rows of 16 bfloat16 pairs, C 16 × 16 float32)
#define TDPBF16PS(c, a, b) BYTE $0xc4; BYTE $0xe2; BYTE $(0x02|((15-(b))<<3)); BYTE $0x5c; BYTE $(0xc0|((c)<<3)|(a))

// GEMM6_STEPS(loop) runs the k steps of one product pair: A part at SI
// (rows DX bytes apart), B part at BX (the four n tiles 1 KB apart, rows
// 64 bytes apart), R8 steps; each step adds A[:, 32s:32s+32]·B[s][n] to
// C tile n (tmm0-3), A in tmm4 and the B tiles in tmm5-7.
#define GEMM6_STEPS(loop) \
	MOVQ ks+64(FP), R8; \
loop: \
	TILELOAD_SI_DX(4); \
	TILELOAD_BX_CX(5); \
	TDPBF16PS(0, 4, 5); \
	TILELOAD_BX_CX_D(6, 1024); \
	TDPBF16PS(1, 4, 6); \
	TILELOAD_BX_CX_D(7, 2048); \
	TDPBF16PS(2, 4, 7); \
	TILELOAD_BX_CX_D(5, 3072); \
	TDPBF16PS(3, 4, 5); \
	ADDQ $64, SI; \
	ADDQ bStep+56(FP), BX; \
	DECQ R8; \
	JNZ loop

// GEMM6_PAIR(i, j, loop) runs the product of A's part i and B's part j.
#define GEMM6_PAIR(i, j, loop) \
	MOVQ aPart+32(FP), SI; \
	IMULQ $(i), SI; \
	ADDQ a+16(FP), SI; \
	MOVQ bPart+48(FP), BX; \
	IMULQ $(j), BX; \
	ADDQ b+40(FP), BX; \
	GEMM6_STEPS(loop)

// func amxGemm6(c *float32, ldc int, a *uint16, lda, aPart int, b *uint16, bPart, bStep, ks int)
// Equals amxGemm6Go (strides in bytes here): C (16 rows × 64 float32, rows
// ldc bytes apart) = the six products of the three-part split, smallest
// first, each over ks k steps.
TEXT ·amxGemm6(SB), NOSPLIT, $0-72
	LEAQ amxCfg<>(SB), AX
	LDTILECFG_AX
	TILEZERO(0)
	TILEZERO(1)
	TILEZERO(2)
	TILEZERO(3)
	MOVQ lda+24(FP), DX
	MOVQ $64, CX

	GEMM6_PAIR(2, 0, gemm6_20) // A's low part times B's high part
	GEMM6_PAIR(1, 1, gemm6_11)
	GEMM6_PAIR(0, 2, gemm6_02)
	GEMM6_PAIR(1, 0, gemm6_10)
	GEMM6_PAIR(0, 1, gemm6_01)
	GEMM6_PAIR(0, 0, gemm6_00)

	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), AX
	TILESTORE_DI_AX(0)
	ADDQ $64, DI
	TILESTORE_DI_AX(1)
	ADDQ $64, DI
	TILESTORE_DI_AX(2)
	ADDQ $64, DI
	TILESTORE_DI_AX(3)
	TILERELEASE
	RET

// amxOdd: the word indexes of VPERMT2W that take the high halves (the
// bfloat16 truncations) of two vectors of 16 float32, in order.
DATA amxOdd<>+0(SB)/8, $0x0007000500030001
DATA amxOdd<>+8(SB)/8, $0x000f000d000b0009
DATA amxOdd<>+16(SB)/8, $0x0017001500130011
DATA amxOdd<>+24(SB)/8, $0x001f001d001b0019
DATA amxOdd<>+32(SB)/8, $0x0027002500230021
DATA amxOdd<>+40(SB)/8, $0x002f002d002b0029
DATA amxOdd<>+48(SB)/8, $0x0037003500330031
DATA amxOdd<>+56(SB)/8, $0x003f003d003b0039
GLOBL amxOdd<>(SB), RODATA|NOPTR, $64

// amxK: the split's constants. Z28 0xFFFF0000 (a float's bfloat16 part),
// Z29 0x7FFFFFFF, Z30 2^-101 as bits, Z31 the width of [2^-101, +Inf) in
// bits.
DATA amxK<>+0(SB)/4, $0xffff0000
DATA amxK<>+4(SB)/4, $0x7fffffff
DATA amxK<>+8(SB)/4, $0x0d000000
DATA amxK<>+12(SB)/4, $0x72800000
GLOBL amxK<>(SB), RODATA|NOPTR, $16

#define AMX_SPLIT_CONSTANTS \
	VPBROADCASTD amxK<>+0(SB), Z28; \
	VPBROADCASTD amxK<>+4(SB), Z29; \
	VPBROADCASTD amxK<>+8(SB), Z30; \
	VPBROADCASTD amxK<>+12(SB), Z31; \
	KXORW K7, K7, K7

// SPLIT3(x, h, m, l, t) splits x into h + m + l exactly, each a float with
// a zero low half (a bfloat16): h = x truncated, m = (x-h) truncated, l =
// x-h-m; and ORs into K7 the lanes of x that are not finite or are below
// 2^-101 in magnitude and not zero (where AMX's flush of subnormal
// bfloat16 parts would lose bits). t, K5 and K6 are clobbered.
#define SPLIT3(x, h, m, l, t) \
	VPANDD Z29, x, t; \
	VPTESTMD t, t, K5; \
	VPSUBD Z30, t, t; \
	VPCMPUD $5, Z31, t, K6; \
	KANDW K5, K6, K6; \
	KORW K6, K7, K7; \
	VPANDD Z28, x, h; \
	VSUBPS h, x, l; \
	VPANDD Z28, l, m; \
	VSUBPS m, l, l

// func amxSplitRows(dst *uint16, dstPart, dstRow int, src *float32, srcRow, rows, chunks int) (ok bool)
// Equals amxSplitRowsGo (strides in bytes here): each row's chunks of 32
// floats as three rows of 32 bfloat16.
TEXT ·amxSplitRows(SB), NOSPLIT, $0-57
	MOVQ dst+0(FP), DI
	MOVQ dstPart+8(FP), R8
	MOVQ src+24(FP), SI
	MOVQ rows+40(FP), CX
	AMX_SPLIT_CONSTANTS
	VMOVDQU32 amxOdd<>(SB), Z27
	TESTQ CX, CX
	JZ splitrows_done

splitrows_row:
	MOVQ chunks+48(FP), DX
	MOVQ SI, R10
	MOVQ DI, R11
	TESTQ DX, DX
	JZ splitrows_next

splitrows_chunk:
	VMOVUPS (R10), Z0
	VMOVUPS 64(R10), Z1
	SPLIT3(Z0, Z2, Z3, Z4, Z26)
	SPLIT3(Z1, Z5, Z6, Z7, Z26)
	VPERMT2W Z5, Z27, Z2
	VPERMT2W Z6, Z27, Z3
	VPERMT2W Z7, Z27, Z4
	VMOVDQU32 Z4, (R11)(R8*2)        // l, m, h: with dstPart 0, h alone
	VMOVDQU32 Z3, (R11)(R8*1)
	VMOVDQU32 Z2, (R11)
	ADDQ $128, R10
	ADDQ $64, R11
	DECQ DX
	JNZ splitrows_chunk

splitrows_next:
	ADDQ srcRow+32(FP), SI
	ADDQ dstRow+16(FP), DI
	DECQ CX
	JNZ splitrows_row

splitrows_done:
	KORTESTW K7, K7
	SETEQ ok+56(FP)
	VZEROUPPER
	RET

// func amxSplitPairs(dst *uint16, dstPart, dstVec, dstPair int, src *float32, srcPair, srcRow, pairs, vecs int) (ok bool)
// Equals amxSplitPairsGo (strides in bytes here): for each pair of rows x
// (at src + p·srcPair) and y (srcRow after it) and each vector of 16
// columns, three vectors of 16 bfloat16 pairs (x's part low, y's high).
TEXT ·amxSplitPairs(SB), NOSPLIT, $0-73
	MOVQ dst+0(FP), DI
	MOVQ dstPart+8(FP), R8
	MOVQ src+32(FP), SI
	MOVQ srcRow+48(FP), R9
	MOVQ pairs+56(FP), CX
	AMX_SPLIT_CONSTANTS
	TESTQ CX, CX
	JZ splitpairs_done

splitpairs_pair:
	MOVQ vecs+64(FP), DX
	MOVQ SI, R10
	MOVQ DI, R11
	TESTQ DX, DX
	JZ splitpairs_next

splitpairs_vec:
	VMOVUPS (R10), Z0
	VMOVUPS (R10)(R9*1), Z1
	SPLIT3(Z0, Z2, Z3, Z4, Z26)
	SPLIT3(Z1, Z5, Z6, Z7, Z26)
	VPSRLD $16, Z2, Z2
	VPSRLD $16, Z3, Z3
	VPSRLD $16, Z4, Z4
	VPTERNLOGD $0xf8, Z28, Z5, Z2 // Z2 | (Z5 & 0xFFFF0000)
	VPTERNLOGD $0xf8, Z28, Z6, Z3
	VPTERNLOGD $0xf8, Z28, Z7, Z4
	VMOVDQU32 Z4, (R11)(R8*2)        // l, m, h: with dstPart 0, h alone
	VMOVDQU32 Z3, (R11)(R8*1)
	VMOVDQU32 Z2, (R11)
	ADDQ $64, R10
	ADDQ dstVec+16(FP), R11
	DECQ DX
	JNZ splitpairs_vec

splitpairs_next:
	ADDQ srcPair+40(FP), SI
	ADDQ dstPair+24(FP), DI
	DECQ CX
	JNZ splitpairs_pair

splitpairs_done:
	KORTESTW K7, K7
	SETEQ ok+72(FP)
	VZEROUPPER
	RET

// func amxUpdate(acc, t *float32, d int, alpha *float32, rows int)
// Equals amxUpdateGo: acc[r*d+c] = acc[r*d+c]·alpha[r] + t[r*d+c], one
// rounding (d a multiple of 16).
TEXT ·amxUpdate(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ t+8(FP), SI
	MOVQ alpha+24(FP), R8
	MOVQ rows+32(FP), CX
	TESTQ CX, CX
	JZ update_done

update_row:
	VBROADCASTSS (R8), Z0
	MOVQ d+16(FP), DX
	SHRQ $4, DX
	TESTQ DX, DX
	JZ update_next

update_vec:
	VMOVUPS (DI), Z1
	VFMADD213PS (SI), Z0, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, DI
	ADDQ $64, SI
	DECQ DX
	JNZ update_vec

update_next:
	ADDQ $4, R8
	DECQ CX
	JNZ update_row

update_done:
	VZEROUPPER
	RET

// func amxConfigRelease()
// Loads the tile configuration and releases it: what every amxGemm6 call
// pays on top of its products (BenchmarkAMX).
TEXT ·amxConfigRelease(SB), NOSPLIT, $0-0
	LEAQ amxCfg<>(SB), AX
	LDTILECFG_AX
	TILERELEASE
	RET

// The fused form at D 64 (amxAttend64). Its operands' offsets are
// constants: query and weight parts 2 KB apart with rows of 128 bytes
// (DX), B parts 8 KB apart, k steps 4 KB, n tiles 1 KB, rows 64 bytes
// (CX); a panel's K or V operand is 24 KB (3 · 8 KB).

// tileloadd tmm<t>, [rsi+rdx*1+disp32]
#define TILELOAD_SI_DX_D(t, disp) BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $(0x84|((t)<<3)); BYTE $0x16; LONG $(disp)

// STEP64(i, j, s) adds A part i's k step s (at SI) times B part j's k step
// s (at BX) to C tiles 0-3.
#define STEP64(i, j, s) \
	TILELOAD_SI_DX_D(4, (i)*2048+(s)*64); \
	TILELOAD_BX_CX_D(5, (j)*8192+(s)*4096); \
	TDPBF16PS(0, 4, 5); \
	TILELOAD_BX_CX_D(6, (j)*8192+(s)*4096+1024); \
	TDPBF16PS(1, 4, 6); \
	TILELOAD_BX_CX_D(7, (j)*8192+(s)*4096+2048); \
	TDPBF16PS(2, 4, 7); \
	TILELOAD_BX_CX_D(5, (j)*8192+(s)*4096+3072); \
	TDPBF16PS(3, 4, 5)

// The twelve steps of the six part products, smallest first, in four
// groups of three (so that they can be spread over a softmax).
#define STEPS64_A STEP64(2, 0, 0); STEP64(2, 0, 1); STEP64(1, 1, 0)
#define STEPS64_B STEP64(1, 1, 1); STEP64(0, 2, 0); STEP64(0, 2, 1)
#define STEPS64_C STEP64(1, 0, 0); STEP64(1, 0, 1); STEP64(0, 1, 0)
#define STEPS64_D STEP64(0, 1, 1); STEPS64_HH
#define STEPS64_HH STEP64(0, 0, 0); STEP64(0, 0, 1)

// With exact operands (amxGroupArgs.exact: every element of Q, K and V a
// bfloat16, as an FP8 problem's code values are), the m and l parts of Q,
// K and V are zero, and so are nine of the twelve products' steps: Q·Kᵀ is
// h·h (STEPS64_HH), P·V the weights' three parts times V's h, in the
// six-product order (STEPS64_PV3). Leaving out exact zeros changes no bit:
// the tiles start at +0 and a zero product adds +0 or -0.
#define STEPS64_PV3 STEP64(2, 0, 0); STEP64(2, 0, 1); STEP64(1, 0, 0); STEP64(1, 0, 1); STEPS64_HH

// QKGROUP(steps, skip) runs steps unless the operands are exact (then
// jumps to skip).
#define QKGROUP(steps, skip) \
	CMPQ 96(R8), $0; \
	JNE skip; \
	steps

#define TILEZERO4 TILEZERO(0); TILEZERO(1); TILEZERO(2); TILEZERO(3)

// STORE4(field) stores C tiles 0-3 as 16 rows of 64 floats at the args
// field's address (rows 256 bytes apart).
#define STORE4(field) \
	MOVQ field(R8), DI; \
	MOVQ $256, AX; \
	TILESTORE_DI_AX(0); \
	ADDQ $64, DI; \
	TILESTORE_DI_AX(1); \
	ADDQ $64, DI; \
	TILESTORE_DI_AX(2); \
	ADDQ $64, DI; \
	TILESTORE_DI_AX(3)

// SMCHUNK(c, slow, rows, nob, nocap, nomask) runs the softmax step (SOFTMAX4X64,
// whose labels slow and rows name) on rows 4c..4c+3 of the scores, masked
// first to their rowBounds in the panel's four at the args' bounds where
// it is not nil (BOUNDED4X64; nob, nocap and nomask name its labels).
#define SMCHUNK(c, slow, rows, nob, nocap, nomask) \
	MOVQ 32(R8), DI; \
	ADDQ $(1024*(c)), DI; \
	MOVQ 56(R8), R11; \
	ADDQ $(16*(c)), R11; \
	MOVQ 64(R8), R12; \
	ADDQ $(16*(c)), R12; \
	MOVQ 72(R8), R13; \
	ADDQ $(16*(c)), R13; \
	VBROADCASTSS 88(R8), Z27; \
	LOAD4X64; \
	MOVQ 104(R8), AX; \
	TESTQ AX, AX; \
	JZ nob; \
	ADDQ $(56*(c)), AX; \
	BOUNDED4X64(nocap, nomask); \
nob: \
	SOFTMAX4X64(slow, rows)

// func amxAttend64(a *amxGroupArgs)
// Equals amxStep on each of a.panels consecutive key panels in turn (D 64,
// the kernel set's AMX step, amx.go), in one tile configuration: the
// scores of the next panel are computed on the tiles while the softmax of
// this one runs on the vector units.
TEXT ·amxAttend64(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), R8
	LEAQ amxCfg<>(SB), AX
	LDTILECFG_AX
	MOVQ $128, DX
	MOVQ $64, CX

	// The first panel's scores.
	MOVQ 0(R8), SI
	MOVQ 8(R8), BX
	TILEZERO4
	CMPQ 96(R8), $0
	JNE attend64_first_hh
	STEPS64_A
	STEPS64_B
	STEPS64_C
	STEP64(0, 1, 1)

attend64_first_hh:
	STEPS64_HH
	STORE4(32)
	XORQ R10, R10
	MOVQ 24(R8), R9

attend64_panel:
	// The next panel's scores (this panel's again on the last, unused),
	// spread over this panel's softmax.
	MOVQ 8(R8), BX
	ADDQ R10, BX
	CMPQ R9, $1
	JEQ attend64_last
	ADDQ $24576, BX

attend64_last:
	MOVQ 0(R8), SI
	TILEZERO4
	QKGROUP(STEPS64_A, attend64_qk0)

attend64_qk0:
	SMCHUNK(0, attend64_slow0, attend64_rows0, attend64_nob0, attend64_nocap0, attend64_nomask0)
	QKGROUP(STEPS64_B, attend64_qk1)

attend64_qk1:
	SMCHUNK(1, attend64_slow1, attend64_rows1, attend64_nob1, attend64_nocap1, attend64_nomask1)
	QKGROUP(STEPS64_C, attend64_qk2)

attend64_qk2:
	SMCHUNK(2, attend64_slow2, attend64_rows2, attend64_nob2, attend64_nocap2, attend64_nomask2)
	QKGROUP(STEP64(0, 1, 1), attend64_qk3)

attend64_qk3:
	STEPS64_HH
	SMCHUNK(3, attend64_slow3, attend64_rows3, attend64_nob3, attend64_nocap3, attend64_nomask3)

	// The weights' parts: 16 rows of two 32-key chunks.
	AMX_SPLIT_CONSTANTS
	VMOVDQU32 amxOdd<>(SB), Z27
	MOVQ 32(R8), R11
	MOVQ 40(R8), R12
	MOVQ $32, R13

attend64_split:
	VMOVUPS (R11), Z0
	VMOVUPS 64(R11), Z1
	SPLIT3(Z0, Z2, Z3, Z4, Z26)
	SPLIT3(Z1, Z5, Z6, Z7, Z26)
	VPERMT2W Z5, Z27, Z2
	VPERMT2W Z6, Z27, Z3
	VPERMT2W Z7, Z27, Z4
	VMOVDQU32 Z2, (R12)
	VMOVDQU32 Z3, 2048(R12)
	VMOVDQU32 Z4, 4096(R12)
	ADDQ $128, R11
	ADDQ $64, R12
	DECQ R13
	JNZ attend64_split

	// The next panel's scores into the scores' buffer, then P·V.
	STORE4(32)
	MOVQ 40(R8), SI
	MOVQ 16(R8), BX
	ADDQ R10, BX
	TILEZERO4
	CMPQ 96(R8), $0
	JNE attend64_pv3
	STEPS64_A
	STEPS64_B
	STEPS64_C
	STEPS64_D
	JMP attend64_pv

attend64_pv3:
	STEPS64_PV3

attend64_pv:
	STORE4(48)

	// acc = acc·alpha + P·V, row by row.
	MOVQ 80(R8), DI
	MOVQ 48(R8), SI
	MOVQ 72(R8), R11
	MOVQ $16, R13

attend64_update:
	VBROADCASTSS (R11), Z0
	VMOVUPS (DI), Z1
	VMOVUPS 64(DI), Z2
	VMOVUPS 128(DI), Z3
	VMOVUPS 192(DI), Z4
	VFMADD213PS (SI), Z0, Z1
	VFMADD213PS 64(SI), Z0, Z2
	VFMADD213PS 128(SI), Z0, Z3
	VFMADD213PS 192(SI), Z0, Z4
	VMOVUPS Z1, (DI)
	VMOVUPS Z2, 64(DI)
	VMOVUPS Z3, 128(DI)
	VMOVUPS Z4, 192(DI)
	ADDQ $256, DI
	ADDQ $256, SI
	ADDQ $4, R11
	DECQ R13
	JNZ attend64_update

	CMPQ 104(R8), $0
	JEQ attend64_next
	ADDQ $224, 104(R8)

attend64_next:
	ADDQ $24576, R10
	DECQ R9
	JNZ attend64_panel

	TILERELEASE
	VZEROUPPER
	RET
