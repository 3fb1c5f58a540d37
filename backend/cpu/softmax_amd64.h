// The AVX-512 softmax pieces shared by kernels_amd64.s and amx_amd64.s. Its
// data are file-local (<>), so each including file has its own copy.

// The AVX-512 exponential of the base-2 sets (exp2_32's algorithm),
// shared by expSum16AVX512 and scoresSoftmax4x64AVX512. EXP16_CONSTANTS puts
// its constants in Z21-Z26: Z21 -126 (the smallest x with a normal 2^x), Z22
// one, Z23..Z26 the coefficients c1..c4 of exp2_32's polynomial. EXP16 loads
// c5 from memory (a load port is free where an ALU port is not).
DATA exp16c<>+0(SB)/4, $0xc2fc0000
DATA exp16c<>+4(SB)/4, $0x3f800000
DATA exp16c<>+8(SB)/4, $0x3f31725d
DATA exp16c<>+12(SB)/4, $0x3e75edab
DATA exp16c<>+16(SB)/4, $0x3d648e77
DATA exp16c<>+20(SB)/4, $0x3c13bc13
DATA exp16c<>+24(SB)/4, $0x3af4bad5
GLOBL exp16c<>(SB), RODATA|NOPTR, $28

#define EXP16_CONSTANTS \
	VBROADCASTSS exp16c<>+0(SB), Z21; \
	VBROADCASTSS exp16c<>+4(SB), Z22; \
	VBROADCASTSS exp16c<>+8(SB), Z23; \
	VBROADCASTSS exp16c<>+12(SB), Z24; \
	VBROADCASTSS exp16c<>+16(SB), Z25; \
	VBROADCASTSS exp16c<>+20(SB), Z26

// EXP16(x, t1, t2, k) sets x = 2^x in 16 lanes (x <= 0 or NaN; the softmax
// domain): f = x - floor(x) by VREDUCEPS (imm 9: round down, no precision
// exception), 2^f by exp2_32's degree-5 polynomial in Horner form with
// fused multiply-adds, times 2^floor(x) by VSCALEFPS, whose zeroing mask
// turns lanes with x < -126 (or -Inf) to 0; NaN stays NaN. Eight ALU
// operations and one load; t1, t2 and the mask register k are clobbered.
#define EXP16(x, t1, t2, k) \
	VCMPPS $5, Z21, x, k; \
	VREDUCEPS $9, x, t1; \
	VBROADCASTSS exp16c<>+24(SB), t2; \
	VFMADD213PS Z26, t1, t2; \
	VFMADD213PS Z25, t1, t2; \
	VFMADD213PS Z24, t1, t2; \
	VFMADD213PS Z23, t1, t2; \
	VFMADD213PS Z22, t1, t2; \
	VSCALEFPS.Z x, t2, k, x

// quarterIdx spreads lanes 0-3 over the four 128-bit quarters of a vector
// (VPERMPS); compactIdx gathers lane 0 of each quarter into lanes 0-3.
DATA quarterIdx<>+0(SB)/8, $0
DATA quarterIdx<>+8(SB)/8, $0
DATA quarterIdx<>+16(SB)/8, $0x0000000100000001
DATA quarterIdx<>+24(SB)/8, $0x0000000100000001
DATA quarterIdx<>+32(SB)/8, $0x0000000200000002
DATA quarterIdx<>+40(SB)/8, $0x0000000200000002
DATA quarterIdx<>+48(SB)/8, $0x0000000300000003
DATA quarterIdx<>+56(SB)/8, $0x0000000300000003
GLOBL quarterIdx<>(SB), RODATA|NOPTR, $64
DATA compactIdx<>+0(SB)/8, $0x0000000400000000
DATA compactIdx<>+8(SB)/8, $0x0000000c00000008
DATA compactIdx<>+16(SB)/8, $0
DATA compactIdx<>+24(SB)/8, $0
DATA compactIdx<>+32(SB)/8, $0
DATA compactIdx<>+40(SB)/8, $0
DATA compactIdx<>+48(SB)/8, $0
DATA compactIdx<>+56(SB)/8, $0
GLOBL compactIdx<>(SB), RODATA|NOPTR, $64

// QUARTERS(OP, r0, r1, r2, r3, t0, t1, t2) reduces the four vectors r0-r3 by
// OP (VMAXPS for the largest, VADDPS for the sum) into r0, each
// 128-bit quarter q of r0 holding the reduction of r<q> in all four lanes:
// upper and lower halves of two rows side by side, then quarters, then
// within quarters. It clobbers r1-r3 and t0-t2.
#define QUARTERS(OP, r0, r1, r2, r3, t0, t1, t2) \
	VSHUFF32X4 $0x44, r1, r0, t0; \
	VSHUFF32X4 $0xee, r1, r0, t1; \
	OP t1, t0, r0; \
	VSHUFF32X4 $0x44, r3, r2, t0; \
	VSHUFF32X4 $0xee, r3, r2, t1; \
	OP t1, t0, r1; \
	VSHUFF32X4 $0x88, r1, r0, t0; \
	VSHUFF32X4 $0xdd, r1, r0, t1; \
	OP t1, t0, r0; \
	VPERMILPS $0x4e, r0, t2; \
	OP t2, r0, r0; \
	VPERMILPS $0xb1, r0, t2; \
	OP t2, r0, r0

// ROWEXP(a, b, c, d, sel, soff) sets the row in a-d to 2^(x - mNew), mNew
// the quarter sel of Z19, stores it at soff(DI) and leaves its sum over
// pairs (a+b)+(c+d) in a. It clobbers Z16, Z17, Z20, Z31 and K1.
#define ROWEXP(a, b, c, d, sel, soff) \
	VSHUFF32X4 sel, Z19, Z19, Z31; \
	VSUBPS Z31, a, a; \
	VSUBPS Z31, b, b; \
	VSUBPS Z31, c, c; \
	VSUBPS Z31, d, d; \
	EXP16(a, Z16, Z17, K1); \
	EXP16(b, Z20, Z31, K1); \
	EXP16(c, Z16, Z17, K1); \
	EXP16(d, Z20, Z31, K1); \
	VMOVUPS a, soff(DI); \
	VMOVUPS b, soff+64(DI); \
	VMOVUPS c, soff+128(DI); \
	VMOVUPS d, soff+192(DI); \
	VADDPS b, a, a; \
	VADDPS d, c, c; \
	VADDPS c, a, a

// LOADSCALED4X64 loads the four rows of scores at DI (rows 256 bytes apart)
// into Z0-Z15, times the scale in Z20.
#define LOADSCALED4X64 \
	VMULPS 0(DI), Z20, Z0; \
	VMULPS 64(DI), Z20, Z1; \
	VMULPS 128(DI), Z20, Z2; \
	VMULPS 192(DI), Z20, Z3; \
	VMULPS 256(DI), Z20, Z4; \
	VMULPS 320(DI), Z20, Z5; \
	VMULPS 384(DI), Z20, Z6; \
	VMULPS 448(DI), Z20, Z7; \
	VMULPS 512(DI), Z20, Z8; \
	VMULPS 576(DI), Z20, Z9; \
	VMULPS 640(DI), Z20, Z10; \
	VMULPS 704(DI), Z20, Z11; \
	VMULPS 768(DI), Z20, Z12; \
	VMULPS 832(DI), Z20, Z13; \
	VMULPS 896(DI), Z20, Z14; \
	VMULPS 960(DI), Z20, Z15

// lazyTau is the rescale threshold of SOFTMAX4X64 (kernelSet.scoresSoftmax4):
// 8, in base-2 units.
DATA lazyTau<>+0(SB)/4, $0x41000000
GLOBL lazyTau<>(SB), RODATA|NOPTR, $4

// SOFTMAX4X64(slow, rows) is the base-2 online-softmax step of
// scoresSoftmax4x64AVX512 on four rows of scaled scores (times log2e:
// kernelSet.base2) in Z0-Z15 (row r in Z4r..Z4r+3), with DI the weights'
// rows, R11 m, R12 l and R13 alpha; slow and rows name its labels. In order:
//   - row maxima: each row's four vectors, then the four rows together into
//     the quarters of Z16 (VMAXPS drops a NaN in its first operand; a row
//     with a NaN gets NaN exponentials and sum below all the same);
//   - in quarters: mOld (Z17), l (Z18); K1 = (l != 0);
//   - the lazy rescale: where every row has l != 0 and a maximum no more
//     than lazyTau above mOld, m stays (Z19 = mOld) and alpha is 1 (Z22,
//     EXP16's constant one), stored;
//   - else (slow) for all four rows: mNew = max(mOld, row max) (Z19);
//     alpha = 2^(mOld-mNew) where l != 0 or mOld is NaN (K1, K2), else
//     2^0 = 1 (Z20), NaN where mOld is; m = mNew, alpha[0:4] stored and
//     l·alpha kept;
//   - each row (rows): 2^(s-m) into s (ROWEXP), then the four sums into
//     quarters, and l = l·alpha + sum.
#define SOFTMAX4X64(slow, rows) \
	EXP16_CONSTANTS; \
	VMAXPS Z1, Z0, Z16; \
	VMAXPS Z3, Z2, Z20; \
	VMAXPS Z20, Z16, Z16; \
	VMAXPS Z5, Z4, Z17; \
	VMAXPS Z7, Z6, Z20; \
	VMAXPS Z20, Z17, Z17; \
	VMAXPS Z9, Z8, Z18; \
	VMAXPS Z11, Z10, Z20; \
	VMAXPS Z20, Z18, Z18; \
	VMAXPS Z13, Z12, Z19; \
	VMAXPS Z15, Z14, Z20; \
	VMAXPS Z20, Z19, Z19; \
	QUARTERS(VMAXPS, Z16, Z17, Z18, Z19, Z20, Z31, Z20); \
	MOVL $15, AX; \
	KMOVW AX, K3; \
	VMOVDQU32 quarterIdx<>(SB), Z20; \
	VMOVUPS.Z (R11), K3, Z17; \
	VPERMPS Z17, Z20, Z17; \
	VMOVUPS.Z (R12), K3, Z18; \
	VPERMPS Z18, Z20, Z18; \
	VPXORD Z20, Z20, Z20; \
	VCMPPS $4, Z20, Z18, K1; \
	VADDPS.BCST lazyTau<>(SB), Z17, Z19; \
	VCMPPS $2, Z19, Z16, K1, K2; \
	KORTESTW K2, K2; \
	JCC slow; \
	VMOVAPS Z17, Z19; \
	VMOVUPS Z22, K3, (R13); \
	JMP rows; \
slow: \
	VMAXPS Z16, Z17, Z19; \
	VCMPPS $3, Z17, Z17, K2; \
	KORW K1, K2, K1; \
	VSUBPS Z19, Z17, Z20; \
	VMOVAPS.Z Z20, K1, Z20; \
	VMOVDQU32 compactIdx<>(SB), Z16; \
	VPERMPS Z19, Z16, Z17; \
	VMOVUPS Z17, K3, (R11); \
	EXP16(Z20, Z16, Z17, K1); \
	VMOVDQU32 compactIdx<>(SB), Z16; \
	VPERMPS Z20, Z16, Z17; \
	VMOVUPS Z17, K3, (R13); \
	VMULPS Z20, Z18, Z18; \
rows: \
	ROWEXP(Z0, Z1, Z2, Z3, $0x00, 0); \
	ROWEXP(Z4, Z5, Z6, Z7, $0x55, 256); \
	ROWEXP(Z8, Z9, Z10, Z11, $0xaa, 512); \
	ROWEXP(Z12, Z13, Z14, Z15, $0xff, 768); \
	QUARTERS(VADDPS, Z0, Z4, Z8, Z12, Z1, Z2, Z3); \
	VADDPS Z0, Z18, Z18; \
	VMOVDQU32 compactIdx<>(SB), Z16; \
	VPERMPS Z18, Z16, Z17; \
	VMOVUPS Z17, K3, (R12);
