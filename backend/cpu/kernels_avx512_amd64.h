// The macros of the AVX-512 micro-kernels (kernels_avx512_amd64.s). They
// are defined in a header, before the first TEXT of the including file,
// since go vet's asmdecl checks a macro's argument references against the
// TEXT above it. Layouts as in kernels_avx512_amd64.s.

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
	STEPS_NEXT(qshift); \
	DECQ 32(SP)

// STEPS_NEXT(qshift) advances the steps' locals by one group: q by
// d<<qshift bytes, acc by 16·d, m and l by 16.
#define STEPS_NEXT(qshift) \
	MOVQ d+24(FP), CX; \
	SHLQ $qshift, CX; \
	ADDQ CX, 0(SP); \
	MOVQ d+24(FP), CX; \
	SHLQ $4, CX; \
	ADDQ CX, 8(SP); \
	ADDQ $16, 16(SP); \
	ADDQ $16, 24(SP)

// BOUNDED_PV(labels) is a bounded group's P·V over its keys [p0, p0+pn)
// of the rowBounds in 40(SP): weights from s+4·p0, values from v+4·p0·d,
// into the group's acc (8(SP)); the labels are PV4X16's.
#define BOUNDED_PV(c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone) \
	MOVQ 40(SP), AX; \
	MOVL 48(AX), R8; \
	MOVL 52(AX), BX; \
	MOVQ 8(SP), DI; \
	MOVQ s+0(FP), SI; \
	LEAQ (SI)(R8*4), SI; \
	MOVQ d+24(FP), CX; \
	IMULQ CX, R8; \
	MOVQ v+64(FP), DX; \
	LEAQ (DX)(R8*4), DX; \
	MOVQ CX, R11; \
	MOVQ alpha+56(FP), AX; \
	PV4X16(c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone)

// BOUNDED_REST(qshift, labels...) is the rest of a bounded group's step
// (stepsBounded4x64AVX512 and its pairs twin) after the sixteen
// accumulators hold its dot products: its rowBounds (40(SP)) applied
// (BOUNDED4X64), the softmax, BOUNDED_PV, and the locals advanced by one
// group (STEPS_NEXT, then the rowBounds by bstride). The labels are
// BOUNDED4X64's, SOFTMAX4X64's and PV4X16's.
// Leaves the groups left in 32(SP).
#define BOUNDED_REST(qshift, nocap, nomask, slow, rows, c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone) \
	MOVQ s+0(FP), DI; \
	VBROADCASTSS scale+32(FP), Z27; \
	MOVQ 16(SP), R11; \
	MOVQ 24(SP), R12; \
	MOVQ alpha+56(FP), R13; \
	MOVQ 40(SP), AX; \
	BOUNDED4X64(nocap, nomask); \
	SOFTMAX4X64(slow, rows); \
	BOUNDED_PV(c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone); \
	STEPS_NEXT(qshift); \
	MOVQ bstride+104(FP), CX; \
	ADDQ CX, 40(SP); \
	DECQ 32(SP)

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
// d in CX already, SCORES4_REGS on the panel's four key vectors. An odd d's first column
// runs alone; the rest run two a trip, the four q rows addressed from their
// ends by one negative index (CX, bytes), so that a trip of 32 multiply-adds
// carries three scalar operations (not the twelve of two one-column trips)
// to compete for the FMA ports. SCORES4_REGS is that loop with its steps
// as the macros at0 and at256 (KEYSN_AT0, KEYSN_AT256 below).
#define SCORES4_REGS(at0, at256, pairs, loop, done) \
	LEAQ (SI)(CX*4), R8; \
	LEAQ (R8)(CX*4), R9; \
	LEAQ (R9)(CX*4), R10; \
	ZERO_Z0_Z15; \
	TESTQ CX, CX; \
	JZ done; \
	TESTQ $1, CX; \
	JZ pairs; \
	at0((SI), (R8), (R9), (R10)); \
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
	at0((SI)(CX*1), (R8)(CX*1), (R9)(CX*1), (R10)(CX*1)); \
	at256(4(SI)(CX*1), 4(R8)(CX*1), 4(R9)(CX*1), 4(R10)(CX*1)); \
	ADDQ $512, DX; \
	ADDQ $8, CX; \
	JNZ loop; \
done:

// KEYSN_AT0(b0, b1, b2, b3) and KEYSN_AT256 are SCORES4_REGS's steps for the
// first N keys of the panel: STEP4X4 (N = 64) or STEP4X1-3 on the key row
// at DX, or on the next one (256 bytes on).
#define KEYS64_AT0(b0, b1, b2, b3) STEP4X4(0(DX), 64(DX), 128(DX), 192(DX), b0, b1, b2, b3)
#define KEYS64_AT256(b0, b1, b2, b3) STEP4X4(256(DX), 320(DX), 384(DX), 448(DX), b0, b1, b2, b3)
#define SCORES4X64_REGS(pairs, loop, done) SCORES4_REGS(KEYS64_AT0, KEYS64_AT256, pairs, loop, done)

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

// STEP4XN(v0, .., b0, b1, b2, b3) for N = 1, 2, 3 is STEP4X4 on the first
// N of the four key vectors (16N keys): the vectors at v0.. into Z16..,
// the four floats at b0-b3 broadcast into Z20-Z23, and the multiply-adds
// into row r's first N accumulators Z4r...
#define STEP4X1(v0, b0, b1, b2, b3) \
	VMOVUPS v0, Z16; \
	VBROADCASTSS b0, Z20; \
	VBROADCASTSS b1, Z21; \
	VBROADCASTSS b2, Z22; \
	VBROADCASTSS b3, Z23; \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z16, Z23, Z12
#define STEP4X2(v0, v1, b0, b1, b2, b3) \
	VMOVUPS v0, Z16; \
	VMOVUPS v1, Z17; \
	VBROADCASTSS b0, Z20; \
	VBROADCASTSS b1, Z21; \
	VBROADCASTSS b2, Z22; \
	VBROADCASTSS b3, Z23; \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z17, Z20, Z1; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z17, Z21, Z5; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z17, Z22, Z9; \
	VFMADD231PS Z16, Z23, Z12; \
	VFMADD231PS Z17, Z23, Z13
#define STEP4X3(v0, v1, v2, b0, b1, b2, b3) \
	VMOVUPS v0, Z16; \
	VMOVUPS v1, Z17; \
	VMOVUPS v2, Z18; \
	VBROADCASTSS b0, Z20; \
	VBROADCASTSS b1, Z21; \
	VBROADCASTSS b2, Z22; \
	VBROADCASTSS b3, Z23; \
	VFMADD231PS Z16, Z20, Z0; \
	VFMADD231PS Z17, Z20, Z1; \
	VFMADD231PS Z18, Z20, Z2; \
	VFMADD231PS Z16, Z21, Z4; \
	VFMADD231PS Z17, Z21, Z5; \
	VFMADD231PS Z18, Z21, Z6; \
	VFMADD231PS Z16, Z22, Z8; \
	VFMADD231PS Z17, Z22, Z9; \
	VFMADD231PS Z18, Z22, Z10; \
	VFMADD231PS Z16, Z23, Z12; \
	VFMADD231PS Z17, Z23, Z13; \
	VFMADD231PS Z18, Z23, Z14

// SCORES4XN_REGS(pairs, loop, done) for N = 16, 32, 48 is SCORES4X64_REGS
// on the first N keys of the panel at DX (rows 256 bytes apart): row r's
// dot products in its first N/16 accumulators Z4r..; the others zero.
#define KEYS16_AT0(b0, b1, b2, b3) STEP4X1(0(DX), b0, b1, b2, b3)
#define KEYS16_AT256(b0, b1, b2, b3) STEP4X1(256(DX), b0, b1, b2, b3)
#define KEYS32_AT0(b0, b1, b2, b3) STEP4X2(0(DX), 64(DX), b0, b1, b2, b3)
#define KEYS32_AT256(b0, b1, b2, b3) STEP4X2(256(DX), 320(DX), b0, b1, b2, b3)
#define KEYS48_AT0(b0, b1, b2, b3) STEP4X3(0(DX), 64(DX), 128(DX), b0, b1, b2, b3)
#define KEYS48_AT256(b0, b1, b2, b3) STEP4X3(256(DX), 320(DX), 384(DX), b0, b1, b2, b3)
#define SCORES4X16_REGS(pairs, loop, done) SCORES4_REGS(KEYS16_AT0, KEYS16_AT256, pairs, loop, done)
#define SCORES4X32_REGS(pairs, loop, done) SCORES4_REGS(KEYS32_AT0, KEYS32_AT256, pairs, loop, done)
#define SCORES4X48_REGS(pairs, loop, done) SCORES4_REGS(KEYS48_AT0, KEYS48_AT256, pairs, loop, done)

// SHIFT_CHUNKS moves each row's accumulators up by one key vector (Z4r+1
// to Z4r+3 take Z4r to Z4r+2): a panel's dot products computed from key
// vector c0 on, shifted c0 times, sit at their keys' places.
#define SHIFT_CHUNKS \
	VMOVAPS Z2, Z3; VMOVAPS Z1, Z2; VMOVAPS Z0, Z1; \
	VMOVAPS Z6, Z7; VMOVAPS Z5, Z6; VMOVAPS Z4, Z5; \
	VMOVAPS Z10, Z11; VMOVAPS Z9, Z10; VMOVAPS Z8, Z9; \
	VMOVAPS Z14, Z15; VMOVAPS Z13, Z14; VMOVAPS Z12, Z13
