// The AVX-512 softmax pieces shared by kernels_avx512_amd64.s and amx_amd64.s. Its
// data are file-local (<>), so each including file has its own copy.

// The AVX-512 exponential of the base-2 sets (exp2_32's algorithm),
// shared by expSum16AVX512 and scoresSoftmax4x64AVX512. EXP16_CONSTANTS puts
// its constants in Z22-Z26: Z22 one, Z23..Z26 the coefficients c1..c4 of
// exp2_32's polynomial. EXP16 loads c5 from memory (a load port is free
// where an ALU port is not).
DATA exp16c<>+0(SB)/4, $0x3f800000
DATA exp16c<>+4(SB)/4, $0x3f31725d
DATA exp16c<>+8(SB)/4, $0x3e75edab
DATA exp16c<>+12(SB)/4, $0x3d648e77
DATA exp16c<>+16(SB)/4, $0x3c13bc13
DATA exp16c<>+20(SB)/4, $0x3af4bad5
GLOBL exp16c<>(SB), RODATA|NOPTR, $24

#define EXP16_CONSTANTS \
	VBROADCASTSS exp16c<>+0(SB), Z22; \
	VBROADCASTSS exp16c<>+4(SB), Z23; \
	VBROADCASTSS exp16c<>+8(SB), Z24; \
	VBROADCASTSS exp16c<>+12(SB), Z25; \
	VBROADCASTSS exp16c<>+16(SB), Z26

// EXP16(x, t1, t2) sets x = 2^x in 16 lanes (x < 128 or NaN; the softmax
// domain): f = x - floor(x) by VREDUCEPS (imm 9: round down, no precision
// exception; 0 for x = -Inf), 2^f by exp2_32's degree-5 polynomial in
// Horner form with fused multiply-adds, times 2^floor(x) by VSCALEFPS,
// which rounds lanes below the normal range (x < -126) to subnormals or 0
// and gives 0 for x = -Inf; NaN stays NaN. Seven ALU operations and one
// load; t1 and t2 are clobbered.
#define EXP16(x, t1, t2) \
	VREDUCEPS $9, x, t1; \
	VBROADCASTSS exp16c<>+20(SB), t2; \
	VFMADD213PS Z26, t1, t2; \
	VFMADD213PS Z25, t1, t2; \
	VFMADD213PS Z24, t1, t2; \
	VFMADD213PS Z23, t1, t2; \
	VFMADD213PS Z22, t1, t2; \
	VSCALEFPS x, t2, x

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

// ROWEXP(a, b, c, d, moff, soff) sets the row of raw scores (dot products)
// in a-d to 2^(c·x - m), c the scale in Z27 and m the row's maximum at
// moff(R11), by one fused multiply-subtract a vector (one rounding),
// stores it at soff(DI) and leaves its sum over pairs (a+b)+(c+d) in a.
// It clobbers Z16, Z17, Z20, Z28 and Z31.
#define ROWEXP(a, b, c, d, moff, soff) \
	VBROADCASTSS moff(R11), Z28; \
	VFMSUB213PS Z28, Z27, a; \
	VFMSUB213PS Z28, Z27, b; \
	VFMSUB213PS Z28, Z27, c; \
	VFMSUB213PS Z28, Z27, d; \
	EXP16(a, Z16, Z17); \
	EXP16(b, Z20, Z31); \
	EXP16(c, Z16, Z17); \
	EXP16(d, Z20, Z31); \
	VMOVUPS a, soff(DI); \
	VMOVUPS b, soff+64(DI); \
	VMOVUPS c, soff+128(DI); \
	VMOVUPS d, soff+192(DI); \
	VADDPS b, a, a; \
	VADDPS d, c, c; \
	VADDPS c, a, a

// LOAD4X64 loads the four rows of raw scores at DI (rows 256 bytes apart)
// into Z0-Z15.
#define LOAD4X64 \
	VMOVUPS 0(DI), Z0; \
	VMOVUPS 64(DI), Z1; \
	VMOVUPS 128(DI), Z2; \
	VMOVUPS 192(DI), Z3; \
	VMOVUPS 256(DI), Z4; \
	VMOVUPS 320(DI), Z5; \
	VMOVUPS 384(DI), Z6; \
	VMOVUPS 448(DI), Z7; \
	VMOVUPS 512(DI), Z8; \
	VMOVUPS 576(DI), Z9; \
	VMOVUPS 640(DI), Z10; \
	VMOVUPS 704(DI), Z11; \
	VMOVUPS 768(DI), Z12; \
	VMOVUPS 832(DI), Z13; \
	VMOVUPS 896(DI), Z14; \
	VMOVUPS 960(DI), Z15

// lazyTau is the rescale threshold of SOFTMAX4X64 (kernelSet.scoresSoftmax4):
// 8, in base-2 units.
DATA lazyTau<>+0(SB)/4, $0x41000000
GLOBL lazyTau<>(SB), RODATA|NOPTR, $4

// SOFTMAX4X64(slow, rows) is the base-2 online-softmax step of
// scoresSoftmax4x64AVX512 on four rows of raw scores (dot products) in
// Z0-Z15 (row r in Z4r..Z4r+3), with the scale c > 0 (times log2e:
// kernelSet.base2) in Z27, DI the weights' rows, R11 m, R12 l and R13 alpha
// (alpha[4:8] scratch); slow and rows name its labels. In order:
//   - row maxima: each row's four vectors, lane by lane, times c (for c > 0
//     the largest of the rounded products is the rounded product of the
//     largest, so the lanes' maxima are those of the scaled scores);
//     VMAXPS drops a NaN in its first operand; a row with a NaN gets NaN
//     exponentials and sum below all the same;
//   - the lazy rescale: where every lane of every row is below m + lazyTau
//     (m + lazyTau stored in alpha[4:8]; never for m = -Inf or NaN), m
//     stays and alpha is 1 (Z22, EXP16's constant one), stored;
//   - else (slow): the rows' maxima reduced into the quarters of Z16, and
//     for all four rows: mNew = max(mOld, row max) (Z19); alpha =
//     2^(mOld-mNew) where l != 0 or mOld is NaN (K1, K2), else 2^0 = 1
//     (Z20), NaN where mOld is; m = mNew, alpha and l·alpha stored;
//   - each row (rows): 2^(c·x - m) into x (ROWEXP), then the four sums
//     into quarters, and l = l + sum.
// Every store of m, l and alpha is one unmasked 16-byte store, which the
// next loads of single elements can take from the store buffer.
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
	VMULPS Z27, Z16, Z16; \
	VMULPS Z27, Z17, Z17; \
	VMULPS Z27, Z18, Z18; \
	VMULPS Z27, Z19, Z19; \
	VMOVUPS (R11), X20; \
	VADDPS.BCST lazyTau<>(SB), X20, X20; \
	VMOVUPS X20, 16(R13); \
	VCMPPS.BCST $1, 16(R13), Z16, K1; \
	VCMPPS.BCST $1, 20(R13), Z17, K2; \
	VCMPPS.BCST $1, 24(R13), Z18, K3; \
	VCMPPS.BCST $1, 28(R13), Z19, K4; \
	KANDW K2, K1, K1; \
	KANDW K4, K3, K3; \
	KANDW K3, K1, K1; \
	KORTESTW K1, K1; \
	JCC slow; \
	VMOVUPS X22, (R13); \
	JMP rows; \
slow: \
	QUARTERS(VMAXPS, Z16, Z17, Z18, Z19, Z20, Z31, Z20); \
	VMOVDQU32 quarterIdx<>(SB), Z20; \
	VMOVUPS (R11), X17; \
	VPERMPS Z17, Z20, Z17; \
	VMOVUPS (R12), X18; \
	VPERMPS Z18, Z20, Z18; \
	VPXORD Z20, Z20, Z20; \
	VCMPPS $4, Z20, Z18, K1; \
	VMAXPS Z16, Z17, Z19; \
	VCMPPS $3, Z17, Z17, K2; \
	KORW K1, K2, K1; \
	VSUBPS Z19, Z17, Z20; \
	VMOVAPS.Z Z20, K1, Z20; \
	EXP16(Z20, Z16, Z17); \
	VMULPS Z20, Z18, Z18; \
	VMOVDQU32 compactIdx<>(SB), Z16; \
	VPERMPS Z19, Z16, Z17; \
	VMOVUPS X17, (R11); \
	VPERMPS Z20, Z16, Z17; \
	VMOVUPS X17, (R13); \
	VPERMPS Z18, Z16, Z17; \
	VMOVUPS X17, (R12); \
rows: \
	ROWEXP(Z0, Z1, Z2, Z3, 0, 0); \
	ROWEXP(Z4, Z5, Z6, Z7, 4, 256); \
	ROWEXP(Z8, Z9, Z10, Z11, 8, 512); \
	ROWEXP(Z12, Z13, Z14, Z15, 12, 768); \
	QUARTERS(VADDPS, Z0, Z4, Z8, Z12, Z1, Z2, Z3); \
	VMOVDQU32 compactIdx<>(SB), Z16; \
	VPERMPS Z0, Z16, Z17; \
	VADDPS (R12), X17, X17; \
	VMOVUPS X17, (R12)

// The bounded step's constants (BOUNDED4X64): each lane's key index within
// the panel (64 int32, 0..63), the bounds of four rows that see the whole
// panel (lo 0, hi 64), -Inf, and the masks of a float's magnitude
// and sign.
DATA keyIdx<>+0(SB)/8, $0x0000000100000000
DATA keyIdx<>+8(SB)/8, $0x0000000300000002
DATA keyIdx<>+16(SB)/8, $0x0000000500000004
DATA keyIdx<>+24(SB)/8, $0x0000000700000006
DATA keyIdx<>+32(SB)/8, $0x0000000900000008
DATA keyIdx<>+40(SB)/8, $0x0000000b0000000a
DATA keyIdx<>+48(SB)/8, $0x0000000d0000000c
DATA keyIdx<>+56(SB)/8, $0x0000000f0000000e
DATA keyIdx<>+64(SB)/8, $0x0000001100000010
DATA keyIdx<>+72(SB)/8, $0x0000001300000012
DATA keyIdx<>+80(SB)/8, $0x0000001500000014
DATA keyIdx<>+88(SB)/8, $0x0000001700000016
DATA keyIdx<>+96(SB)/8, $0x0000001900000018
DATA keyIdx<>+104(SB)/8, $0x0000001b0000001a
DATA keyIdx<>+112(SB)/8, $0x0000001d0000001c
DATA keyIdx<>+120(SB)/8, $0x0000001f0000001e
DATA keyIdx<>+128(SB)/8, $0x0000002100000020
DATA keyIdx<>+136(SB)/8, $0x0000002300000022
DATA keyIdx<>+144(SB)/8, $0x0000002500000024
DATA keyIdx<>+152(SB)/8, $0x0000002700000026
DATA keyIdx<>+160(SB)/8, $0x0000002900000028
DATA keyIdx<>+168(SB)/8, $0x0000002b0000002a
DATA keyIdx<>+176(SB)/8, $0x0000002d0000002c
DATA keyIdx<>+184(SB)/8, $0x0000002f0000002e
DATA keyIdx<>+192(SB)/8, $0x0000003100000030
DATA keyIdx<>+200(SB)/8, $0x0000003300000032
DATA keyIdx<>+208(SB)/8, $0x0000003500000034
DATA keyIdx<>+216(SB)/8, $0x0000003700000036
DATA keyIdx<>+224(SB)/8, $0x0000003900000038
DATA keyIdx<>+232(SB)/8, $0x0000003b0000003a
DATA keyIdx<>+240(SB)/8, $0x0000003d0000003c
DATA keyIdx<>+248(SB)/8, $0x0000003f0000003e
GLOBL keyIdx<>(SB), RODATA|NOPTR, $256
DATA fullBounds<>+0(SB)/8, $0
DATA fullBounds<>+8(SB)/8, $0
DATA fullBounds<>+16(SB)/8, $0x0000004000000040
DATA fullBounds<>+24(SB)/8, $0x0000004000000040
GLOBL fullBounds<>(SB), RODATA|NOPTR, $32
DATA negInf<>+0(SB)/4, $0xff800000
GLOBL negInf<>(SB), RODATA|NOPTR, $4
DATA absMask<>+0(SB)/4, $0x7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $4
DATA signMask<>+0(SB)/4, $0x80000000
GLOBL signMask<>(SB), RODATA|NOPTR, $4

// SOFTCAP16(x) sets the 16 scores x (dot products) to softcapRow's
// softcapped c·x, c in Z27: t = c·x rounded, e = 2^(|t|·m2) by EXP16 (m2 in
// Z28), ck·(1-e) rounded, over 1+e rounded (ck in Z29, one in Z22), t's sign
// put back (Z30 the magnitude mask, Z31 the sign mask): the operations of
// softcapRow in its order, so the same bits. Clobbers Z16-Z18.
#define SOFTCAP16(x) \
	VMULPS Z27, x, x; \
	VANDPS Z30, x, Z18; \
	VMULPS Z28, Z18, Z18; \
	EXP16(Z18, Z16, Z17); \
	VSUBPS Z18, Z22, Z16; \
	VADDPS Z22, Z18, Z18; \
	VMULPS Z29, Z16, Z16; \
	VDIVPS Z18, Z16, Z16; \
	VANDPS Z31, x, x; \
	VORPS Z16, x, x

// MASK16(x, idx) replaces the lanes of x whose key index (idx) is below
// the row's lo (Z28) or at least its hi (Z29) by -Inf (Z30).
#define MASK16(x, idx) \
	VPCMPD $1, Z28, idx, K1; \
	VPCMPD $5, Z29, idx, K2; \
	KORW K2, K1, K1; \
	VMOVAPS Z30, K1, x

// MASKROW(lo, hi, a, b, c, d) masks one row's four vectors by its bounds
// at lo(AX) and hi(AX), the key indices in Z16-Z19.
#define MASKROW(lo, hi, a, b, c, d) \
	VPBROADCASTD lo(AX), Z28; \
	VPBROADCASTD hi(AX), Z29; \
	MASK16(a, Z16); \
	MASK16(b, Z17); \
	MASK16(c, Z18); \
	MASK16(d, Z19)

// SOFTCAP4X64 softcaps the four rows of dot products in Z0-Z15 (scale c
// in Z27) under the rowBounds at AX (SOFTCAP16, m2 and ck from AX) and
// sets Z27 to 1: the scores are then scaled. Clobbers Z16-Z31.
#define SOFTCAP4X64 \
	EXP16_CONSTANTS; \
	VBROADCASTSS 32(AX), Z28; \
	VBROADCASTSS 36(AX), Z29; \
	VPBROADCASTD absMask<>(SB), Z30; \
	VPBROADCASTD signMask<>(SB), Z31; \
	SOFTCAP16(Z0); SOFTCAP16(Z1); SOFTCAP16(Z2); SOFTCAP16(Z3); \
	SOFTCAP16(Z4); SOFTCAP16(Z5); SOFTCAP16(Z6); SOFTCAP16(Z7); \
	SOFTCAP16(Z8); SOFTCAP16(Z9); SOFTCAP16(Z10); SOFTCAP16(Z11); \
	SOFTCAP16(Z12); SOFTCAP16(Z13); SOFTCAP16(Z14); SOFTCAP16(Z15); \
	VMOVAPS Z22, Z27

// MASK4X64 sets each row's lanes of Z0-Z15 outside its [lo, hi) of the
// rowBounds at AX to -Inf. Clobbers Z16-Z19, Z28-Z30, K1 and K2.
#define MASK4X64 \
	VMOVDQU32 keyIdx<>+0(SB), Z16; \
	VMOVDQU32 keyIdx<>+64(SB), Z17; \
	VMOVDQU32 keyIdx<>+128(SB), Z18; \
	VMOVDQU32 keyIdx<>+192(SB), Z19; \
	VPBROADCASTD negInf<>(SB), Z30; \
	MASKROW(0, 16, Z0, Z1, Z2, Z3); \
	MASKROW(4, 20, Z4, Z5, Z6, Z7); \
	MASKROW(8, 24, Z8, Z9, Z10, Z11); \
	MASKROW(12, 28, Z12, Z13, Z14, Z15)

// BOUNDED4X64(nocap, nomask) turns the four rows of dot products in
// Z0-Z15 (scale c in Z27) into the scores SOFTMAX4X64 takes under the
// rowBounds at AX (lo[4], hi[4] int32, m2 and ck float32): where ck != 0,
// softcapped (SOFTCAP4X64); then, unless every row sees the whole panel
// (fullBounds), each row's lanes outside [lo, hi) set to -Inf (MASK4X64),
// so that a masked key stays masked, softcap or not. nocap and nomask
// name its labels. Clobbers Z16-Z31 (Z16-Z19 and Z28-Z30 alone where ck
// is 0), K1 and K2.
#define BOUNDED4X64(nocap, nomask) \
	CMPL 36(AX), $0; \
	JEQ nocap; \
	SOFTCAP4X64; \
nocap: \
	VMOVDQU32 0(AX), Y16; \
	VPCMPD $4, fullBounds<>(SB), Y16, K1; \
	KORTESTB K1, K1; \
	JZ nomask; \
	MASK4X64; \
nomask:
