//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The CPU backend's micro-kernels for arm64, on NEON (four float32 lanes a
// vector, 32 vector registers). Each routine equals the Go loop named in
// its comment (kernels.go, reference_test.go), with multiply-adds fused;
// the Go wrappers in kernels_arm64.go check the bounds first.
//
// Layouts: q and acc rows are d floats apart, v rows d floats apart, score
// rows (s, p) a stride apart (panel = 64 floats, 256 bytes, but where the
// routine takes a stride), kt rows 64 floats apart.
//
// The product loops keep a 4-row × 16-column block in sixteen accumulators
// V0-V15 (row r's four vectors in V4r..V4r+3). A step over four inner
// indices loads four consecutive elements of each of the four rows (V16-V19)
// and, for each index, four vectors (V20-V23) of the other operand, and
// multiplies those by the rows' elements lane by lane (FMLA by element):
// 64 multiply-adds for 8 loads. An inner index left over (d or n not a
// multiple of 4) takes one element a row, replicated (LD1R).

// (Defined before the first TEXT, since go vet's asmdecl would check its
// argument references against the TEXT above it.)
//
// PV_ARGS loads the arguments acc, p, v, d, n and cols of pv4x4NEON and
// pv1x4NEON into R0-R5, d and cols in bytes.
#define PV_ARGS \
	MOVD acc+0(FP), R0; MOVD p+8(FP), R1; MOVD v+16(FP), R2; \
	MOVD d+24(FP), R3; MOVD n+32(FP), R4; MOVD cols+40(FP), R5; \
	LSL $2, R3, R3; LSL $2, R5, R5

// FMA16E(i) is the 16 multiply-adds of inner index i of a step:
// V(4r+c) += V(20+c) · V(16+r).S[i].
#define FMA16E(i) \
	FMLA4S_E(16, i, 20, 0); FMLA4S_E(16, i, 21, 1); FMLA4S_E(16, i, 22, 2); FMLA4S_E(16, i, 23, 3); \
	FMLA4S_E(17, i, 20, 4); FMLA4S_E(17, i, 21, 5); FMLA4S_E(17, i, 22, 6); FMLA4S_E(17, i, 23, 7); \
	FMLA4S_E(18, i, 20, 8); FMLA4S_E(18, i, 21, 9); FMLA4S_E(18, i, 22, 10); FMLA4S_E(18, i, 23, 11); \
	FMLA4S_E(19, i, 20, 12); FMLA4S_E(19, i, 21, 13); FMLA4S_E(19, i, 22, 14); FMLA4S_E(19, i, 23, 15)

// FMA16 is FMA16E for a left-over index, its row elements replicated in
// V16-V19: V(4r+c) += V(20+c) · V(16+r).
#define FMA16 \
	VFMLA V20.S4, V16.S4, V0.S4; VFMLA V21.S4, V16.S4, V1.S4; VFMLA V22.S4, V16.S4, V2.S4; VFMLA V23.S4, V16.S4, V3.S4; \
	VFMLA V20.S4, V17.S4, V4.S4; VFMLA V21.S4, V17.S4, V5.S4; VFMLA V22.S4, V17.S4, V6.S4; VFMLA V23.S4, V17.S4, V7.S4; \
	VFMLA V20.S4, V18.S4, V8.S4; VFMLA V21.S4, V18.S4, V9.S4; VFMLA V22.S4, V18.S4, V10.S4; VFMLA V23.S4, V18.S4, V11.S4; \
	VFMLA V20.S4, V19.S4, V12.S4; VFMLA V21.S4, V19.S4, V13.S4; VFMLA V22.S4, V19.S4, V14.S4; VFMLA V23.S4, V19.S4, V15.S4

// LOAD4ROWS(r0, r1, r2, r3) loads four elements of each of the rows at
// r0-r3 into V16-V19, advancing the pointers.
#define LOAD4ROWS(r0, r1, r2, r3) \
	VLD1.P 16(r0), [V16.S4]; VLD1.P 16(r1), [V17.S4]; VLD1.P 16(r2), [V18.S4]; VLD1.P 16(r3), [V19.S4]

// LOAD1ROWS(r0, r1, r2, r3) loads one element of each of the rows at r0-r3,
// replicated, into V16-V19, advancing the pointers.
#define LOAD1ROWS(r0, r1, r2, r3) \
	VLD1R.P 4(r0), [V16.S4]; VLD1R.P 4(r1), [V17.S4]; VLD1R.P 4(r2), [V18.S4]; VLD1R.P 4(r3), [V19.S4]

// func scores4x64NEON(s, q, kt *float32, d int, scale float32, blocks, stride int)
// Equals scores4Go on the first 16·blocks keys (blocks in [1, 4]; s and kt
// at the first key of the first block), s's rows stride floats apart:
// blocks of 16 keys, each the 4 rows × 16 keys of the sixteen accumulators
// over i < d (kt's row i at 256·i bytes, read by a post-increment of R9 =
// 256), then times scale (one rounding each) and stored (s's rows by a
// post-increment of R16 = 4·stride).
TEXT ·scores4x64NEON(SB), NOSPLIT, $0-56
	MOVD s+0(FP), R0
	MOVD q+8(FP), R1
	MOVD kt+16(FP), R2
	MOVD d+24(FP), R3
	FMOVS scale+32(FP), F31
	LSL $2, R3, R4
	MOVD $256, R9
	MOVD blocks+40(FP), R10
	MOVD stride+48(FP), R16
	LSL $2, R16, R16

s4_block:
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	MOVD R1, R11
	ADD R4, R11, R12
	ADD R4, R12, R13
	ADD R4, R13, R14
	MOVD R2, R15
	LSR $2, R3, R5
	CBZ R5, s4_tail

s4_quad:
	LOAD4ROWS(R11, R12, R13, R14)
	VLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(0)
	VLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(1)
	VLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(2)
	VLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(3)
	SUBS $1, R5
	BNE s4_quad

s4_tail:
	AND $3, R3, R5
	CBZ R5, s4_store

s4_one:
	LOAD1ROWS(R11, R12, R13, R14)
	VLD1.P (R15)(R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16
	SUBS $1, R5
	BNE s4_one

s4_store:
	FMUL4S_E(31, 0, 0, 0); FMUL4S_E(31, 0, 1, 1); FMUL4S_E(31, 0, 2, 2); FMUL4S_E(31, 0, 3, 3)
	FMUL4S_E(31, 0, 4, 4); FMUL4S_E(31, 0, 5, 5); FMUL4S_E(31, 0, 6, 6); FMUL4S_E(31, 0, 7, 7)
	FMUL4S_E(31, 0, 8, 8); FMUL4S_E(31, 0, 9, 9); FMUL4S_E(31, 0, 10, 10); FMUL4S_E(31, 0, 11, 11)
	FMUL4S_E(31, 0, 12, 12); FMUL4S_E(31, 0, 13, 13); FMUL4S_E(31, 0, 14, 14); FMUL4S_E(31, 0, 15, 15)
	MOVD R0, R6
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], (R6)(R16)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], (R6)(R16)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], (R6)(R16)
	VST1 [V12.S4, V13.S4, V14.S4, V15.S4], (R6)
	ADD $64, R0
	ADD $64, R2
	SUBS $1, R10
	BNE s4_block
	RET

// func pv4x4NEON(acc, p, v *float32, d, n, cols, stride int, alpha *[4]float32)
// Equals pv4StridedGo on columns [0, cols), cols a multiple of 4: blocks
// of 16 columns keep 4 rows × 16 columns in the sixteen accumulators,
// rescaled by alpha (one rounding; x·1 = x), then the keys j < n in order,
// four a step (p's four rows, R16 = 4·stride bytes apart, the row
// elements, v's rows the vectors); then blocks of 4 columns in four
// accumulators (V0, V4, V8, V12) the same way.
TEXT ·pv4x4NEON(SB), NOSPLIT, $0-64
	PV_ARGS
	MOVD stride+48(FP), R16
	LSL $2, R16, R16
	MOVD alpha+56(FP), R6
	VLD1 (R6), [V30.S4]
	ADD R3, R0, R6
	ADD R3, R6, R7
	ADD R3, R7, R8

pv4_c16:
	CMP $64, R5
	BLT pv4_c4
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1 (R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1 (R7), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1 (R8), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMUL4S_E(30, 0, 0, 0); FMUL4S_E(30, 0, 1, 1); FMUL4S_E(30, 0, 2, 2); FMUL4S_E(30, 0, 3, 3)
	FMUL4S_E(30, 1, 4, 4); FMUL4S_E(30, 1, 5, 5); FMUL4S_E(30, 1, 6, 6); FMUL4S_E(30, 1, 7, 7)
	FMUL4S_E(30, 2, 8, 8); FMUL4S_E(30, 2, 9, 9); FMUL4S_E(30, 2, 10, 10); FMUL4S_E(30, 2, 11, 11)
	FMUL4S_E(30, 3, 12, 12); FMUL4S_E(30, 3, 13, 13); FMUL4S_E(30, 3, 14, 14); FMUL4S_E(30, 3, 15, 15)
	MOVD R1, R9
	ADD R16, R9, R10
	ADD R16, R10, R11
	ADD R16, R11, R12
	MOVD R2, R13
	LSR $2, R4, R14
	CBZ R14, pv4_t16

pv4_q16:
	LOAD4ROWS(R9, R10, R11, R12)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(0)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(1)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(2)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16E(3)
	SUBS $1, R14
	BNE pv4_q16

pv4_t16:
	ANDS $3, R4, R14
	BEQ pv4_s16

pv4_o16:
	LOAD1ROWS(R9, R10, R11, R12)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMA16
	SUBS $1, R14
	BNE pv4_o16

pv4_s16:
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R6)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R7)
	VST1.P [V12.S4, V13.S4, V14.S4, V15.S4], 64(R8)
	ADD $64, R2
	SUB $64, R5
	B pv4_c16

pv4_c4:
	CBZ R5, pv4_done
	VLD1 (R0), [V0.S4]
	VLD1 (R6), [V4.S4]
	VLD1 (R7), [V8.S4]
	VLD1 (R8), [V12.S4]
	FMUL4S_E(30, 0, 0, 0)
	FMUL4S_E(30, 1, 4, 4)
	FMUL4S_E(30, 2, 8, 8)
	FMUL4S_E(30, 3, 12, 12)
	MOVD R1, R9
	ADD R16, R9, R10
	ADD R16, R10, R11
	ADD R16, R11, R12
	MOVD R2, R13
	LSR $2, R4, R14
	CBZ R14, pv4_t4

pv4_q4:
	LOAD4ROWS(R9, R10, R11, R12)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 0, 20, 0); FMLA4S_E(17, 0, 20, 4); FMLA4S_E(18, 0, 20, 8); FMLA4S_E(19, 0, 20, 12)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 1, 20, 0); FMLA4S_E(17, 1, 20, 4); FMLA4S_E(18, 1, 20, 8); FMLA4S_E(19, 1, 20, 12)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 2, 20, 0); FMLA4S_E(17, 2, 20, 4); FMLA4S_E(18, 2, 20, 8); FMLA4S_E(19, 2, 20, 12)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 3, 20, 0); FMLA4S_E(17, 3, 20, 4); FMLA4S_E(18, 3, 20, 8); FMLA4S_E(19, 3, 20, 12)
	SUBS $1, R14
	BNE pv4_q4

pv4_t4:
	ANDS $3, R4, R14
	BEQ pv4_s4

pv4_o4:
	LOAD1ROWS(R9, R10, R11, R12)
	VLD1.P (R13)(R3), [V20.S4]
	VFMLA V20.S4, V16.S4, V0.S4
	VFMLA V20.S4, V17.S4, V4.S4
	VFMLA V20.S4, V18.S4, V8.S4
	VFMLA V20.S4, V19.S4, V12.S4
	SUBS $1, R14
	BNE pv4_o4

pv4_s4:
	VST1.P [V0.S4], 16(R0)
	VST1.P [V4.S4], 16(R6)
	VST1.P [V8.S4], 16(R7)
	VST1.P [V12.S4], 16(R8)
	ADD $16, R2
	SUB $16, R5
	B pv4_c4

pv4_done:
	RET

// func pv1x4NEON(acc, p, v *float32, d, n, cols int, alpha float32)
// Equals pv1Go on columns [0, cols), cols a multiple of 4: blocks of 16
// columns in four accumulators (V0-V3), rescaled by alpha, then the keys
// in order, four a step (p's four elements in V16, v's rows in V20-V23);
// then blocks of 4 columns in one (V0).
TEXT ·pv1x4NEON(SB), NOSPLIT, $0-52
	PV_ARGS
	FMOVS alpha+48(FP), F30

pv1_c16:
	CMP $64, R5
	BLT pv1_c4
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMUL4S_E(30, 0, 0, 0); FMUL4S_E(30, 0, 1, 1); FMUL4S_E(30, 0, 2, 2); FMUL4S_E(30, 0, 3, 3)
	MOVD R1, R9
	MOVD R2, R13
	LSR $2, R4, R14
	CBZ R14, pv1_t16

pv1_q16:
	VLD1.P 16(R9), [V16.S4]
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMLA4S_E(16, 0, 20, 0); FMLA4S_E(16, 0, 21, 1); FMLA4S_E(16, 0, 22, 2); FMLA4S_E(16, 0, 23, 3)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMLA4S_E(16, 1, 20, 0); FMLA4S_E(16, 1, 21, 1); FMLA4S_E(16, 1, 22, 2); FMLA4S_E(16, 1, 23, 3)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMLA4S_E(16, 2, 20, 0); FMLA4S_E(16, 2, 21, 1); FMLA4S_E(16, 2, 22, 2); FMLA4S_E(16, 2, 23, 3)
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMLA4S_E(16, 3, 20, 0); FMLA4S_E(16, 3, 21, 1); FMLA4S_E(16, 3, 22, 2); FMLA4S_E(16, 3, 23, 3)
	SUBS $1, R14
	BNE pv1_q16

pv1_t16:
	ANDS $3, R4, R14
	BEQ pv1_s16

pv1_o16:
	VLD1R.P 4(R9), [V16.S4]
	VLD1.P (R13)(R3), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA V20.S4, V16.S4, V0.S4
	VFMLA V21.S4, V16.S4, V1.S4
	VFMLA V22.S4, V16.S4, V2.S4
	VFMLA V23.S4, V16.S4, V3.S4
	SUBS $1, R14
	BNE pv1_o16

pv1_s16:
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	ADD $64, R2
	SUB $64, R5
	B pv1_c16

pv1_c4:
	CBZ R5, pv1_done
	VLD1 (R0), [V0.S4]
	FMUL4S_E(30, 0, 0, 0)
	MOVD R1, R9
	MOVD R2, R13
	LSR $2, R4, R14
	CBZ R14, pv1_t4

pv1_q4:
	VLD1.P 16(R9), [V16.S4]
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 0, 20, 0)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 1, 20, 0)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 2, 20, 0)
	VLD1.P (R13)(R3), [V20.S4]
	FMLA4S_E(16, 3, 20, 0)
	SUBS $1, R14
	BNE pv1_q4

pv1_t4:
	ANDS $3, R4, R14
	BEQ pv1_s4

pv1_o4:
	VLD1R.P 4(R9), [V16.S4]
	VLD1.P (R13)(R3), [V20.S4]
	VFMLA V20.S4, V16.S4, V0.S4
	SUBS $1, R14
	BNE pv1_o4

pv1_s4:
	VST1.P [V0.S4], 16(R0)
	ADD $16, R2
	SUB $16, R5
	B pv1_c4

pv1_done:
	RET

// func max4NEON(s *float32, n int) float32
// Equals rowMaxGo on s[:n], n a positive multiple of 4: four running
// maxima over 16 elements a step, then one over 4, then across them. FMAX
// gives NaN where either operand is NaN, as the max builtin does, so a NaN
// anywhere is the result.
TEXT ·max4NEON(SB), NOSPLIT, $0-20
	MOVD s+0(FP), R0
	MOVD n+8(FP), R1
	MOVW $0xff800000, R3
	VDUP R3, V0.S4
	VDUP R3, V1.S4
	VDUP R3, V2.S4
	VDUP R3, V3.S4

max_16:
	CMP $16, R1
	BLT max_4
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMAX4S(4, 0, 0)
	FMAX4S(5, 1, 1)
	FMAX4S(6, 2, 2)
	FMAX4S(7, 3, 3)
	SUB $16, R1
	B max_16

max_4:
	CBZ R1, max_reduce
	VLD1.P 16(R0), [V4.S4]
	FMAX4S(4, 0, 0)
	SUB $4, R1
	B max_4

max_reduce:
	FMAX4S(1, 0, 0)
	FMAX4S(3, 2, 2)
	FMAX4S(2, 0, 0)
	FMAXV4S(0, 0)
	FMOVS F0, ret+16(FP)
	RET

// EXP4_CONSTS loads EXP4's constants into V21-V30, four lanes each: 1
// (V21), the polynomial's coefficients 1/2 to 1/720 (V22-V26), ln2's low
// and high parts (V27, V28), log2e (V29) and -87.33654 (V30, the clamp
// below the normal range that the callers apply). It writes R3.
#define EXP4_CONSTS \
	MOVW $0xc2aeac4f, R3; VDUP R3, V30.S4; \
	MOVW $0x3fb8aa3b, R3; VDUP R3, V29.S4; \
	MOVW $0x3f318000, R3; VDUP R3, V28.S4; \
	MOVW $0xb95e8083, R3; VDUP R3, V27.S4; \
	MOVW $0x3ab60b61, R3; VDUP R3, V26.S4; \
	MOVW $0x3c088889, R3; VDUP R3, V25.S4; \
	MOVW $0x3d2aaaab, R3; VDUP R3, V24.S4; \
	MOVW $0x3e2aaaab, R3; VDUP R3, V23.S4; \
	MOVW $0x3f000000, R3; VDUP R3, V22.S4; \
	MOVW $0x3f800000, R3; VDUP R3, V21.S4

// EXP4(x, X, t, T, k, K, p, P) sets P to e^x for the four lanes of x (x
// already clamped to at least -87.33654), by exp32's algorithm with its
// multiply-adds fused: k = x·log2e rounded (halves away from zero, as
// exp32 rounds), r = x - k·ln2hi - k·ln2lo, e^r by the degree-6 Taylor
// polynomial in Horner form (each step a copy of the coefficient and an
// FMLA), times 2^k built in the exponent bits (k in [-126, 1] on the
// softmax domain, x <= 0). NaN stays NaN. X, T and K are clobbered.
// Constants: V29 log2e, V28 ln2hi, V27 ln2lo, V26-V22 1/720, 1/120, 1/24,
// 1/6, 1/2 and V21 one (also 127<<23, 2^0's bits).
#define EXP4(x, X, t, T, k, K, p, P) \
	FMUL4S(29, x, k); \
	FRINTA4S(k, k); \
	VFMLS V28.S4, K.S4, X.S4; \
	VFMLS V27.S4, K.S4, X.S4; \
	VORR V25.B16, V25.B16, P.B16; \
	VFMLA V26.S4, X.S4, P.S4; \
	VORR V24.B16, V24.B16, T.B16; \
	VFMLA P.S4, X.S4, T.S4; \
	VORR V23.B16, V23.B16, P.B16; \
	VFMLA T.S4, X.S4, P.S4; \
	VORR V22.B16, V22.B16, T.B16; \
	VFMLA P.S4, X.S4, T.S4; \
	VORR V21.B16, V21.B16, P.B16; \
	VFMLA T.S4, X.S4, P.S4; \
	VORR V21.B16, V21.B16, T.B16; \
	VFMLA P.S4, X.S4, T.S4; \
	FCVTZS4S(k, k); \
	VSHL $23, K.S4, K.S4; \
	VADD V21.S4, K.S4, K.S4; \
	FMUL4S(k, t, p)

// func expSum4NEON(s *float32, n int, m float32) float32
// Equals expSumGo on s[:n], n a positive multiple of 4, four lanes at a
// time: x = s - m; lanes with x < -87.33654 (below the normal range, or
// -Inf) become 0, as exp32 returns; the others e^x by EXP4; the sum taken
// in four lanes and then across them.
TEXT ·expSum4NEON(SB), NOSPLIT, $0-28
	MOVD s+0(FP), R0
	MOVD n+8(FP), R1
	FMOVS m+16(FP), F31
	VDUP V31.S[0], V31.S4
	EXP4_CONSTS
	VEOR V20.B16, V20.B16, V20.B16 // the sum
	VEOR V19.B16, V19.B16, V19.B16 // zero

expsum_loop:
	VLD1 (R0), [V0.S4]
	FSUB4S(31, 0, 0)
	FCMGT4S(0, 30, 1) // -87.33654 > x: 0
	FMAX4S(30, 0, 0)
	EXP4(0, V0, 2, V2, 3, V3, 4, V4)
	VBIT V1.B16, V19.B16, V4.B16
	VST1.P [V4.S4], 16(R0)
	FADD4S(4, 20, 20)
	SUBS $4, R1
	BNE expsum_loop
	FADDP4S(20, 20, 20)
	FADDP4S(20, 20, 20)
	FMOVS F20, ret+24(FP)
	RET

// func softcap4NEON(s *float32, n int, m2, ck float32)
// Equals softcapRow's two loops on s[:n] (n a positive multiple of 4) with
// the neon set's exponential, four lanes at a time: t = |x|·m2; e = e^t by
// expSum4NEON's steps (t - 0 is t, so the subtraction is left out); x =
// ck·(1-e)/(1+e), each operation rounded in that order, with x's sign
// (softcapOf).
TEXT ·softcap4NEON(SB), NOSPLIT, $0-24
	MOVD s+0(FP), R0
	MOVD n+8(FP), R1
	FMOVS m2+16(FP), F31
	VDUP V31.S[0], V31.S4
	FMOVS ck+20(FP), F18
	VDUP V18.S[0], V18.S4
	EXP4_CONSTS
	VEOR V19.B16, V19.B16, V19.B16 // zero
	MOVW $0x80000000, R3 // the sign bit
	VDUP R3, V17.S4

softcap_loop:
	VLD1 (R0), [V0.S4]
	VAND V17.B16, V0.B16, V5.B16 // x's sign
	FABS4S(0, 0)
	FMUL4S(31, 0, 0)
	FCMGT4S(0, 30, 1) // -87.33654 > t: e = 0
	FMAX4S(30, 0, 0)
	EXP4(0, V0, 2, V2, 3, V3, 4, V4)
	VBIT V1.B16, V19.B16, V4.B16 // e
	FSUB4S(4, 21, 6) // 1 - e
	FADD4S(4, 21, 7) // 1 + e
	FMUL4S(18, 6, 6)
	FDIV4S(7, 6, 6)
	VORR V5.B16, V6.B16, V6.B16
	VST1.P [V6.S4], 16(R0)
	SUBS $4, R1
	BNE softcap_loop
	RET

// func transpose4x4NEON(kt, k *float32, d, keyBlocks, dimBlocks int)
// Equals transposePanelGo's blocks of 4 keys × 4 dims for the first
// 4·keyBlocks keys and 4·dimBlocks dims: kt[i*panel+j] = k[j*d+i]. Each
// block is four key rows' four dims (V0-V3), transposed by TRN1/TRN2 on
// lanes and then on lane pairs, stored as four dims' four keys, 256 bytes
// apart.
TEXT ·transpose4x4NEON(SB), NOSPLIT, $0-40
	MOVD kt+0(FP), R0
	MOVD k+8(FP), R1
	MOVD d+16(FP), R2
	MOVD keyBlocks+24(FP), R3
	MOVD dimBlocks+32(FP), R4
	LSL $2, R2, R2
	MOVD $256, R9

tr_keys:
	MOVD R1, R5
	ADD R2, R5, R6
	ADD R2, R6, R7
	ADD R2, R7, R8
	MOVD R0, R10
	MOVD R4, R11

tr_dims:
	VLD1.P 16(R5), [V0.S4]
	VLD1.P 16(R6), [V1.S4]
	VLD1.P 16(R7), [V2.S4]
	VLD1.P 16(R8), [V3.S4]
	VTRN1 V1.S4, V0.S4, V4.S4 // a0 b0 a2 b2
	VTRN2 V1.S4, V0.S4, V5.S4 // a1 b1 a3 b3
	VTRN1 V3.S4, V2.S4, V6.S4 // c0 d0 c2 d2
	VTRN2 V3.S4, V2.S4, V7.S4 // c1 d1 c3 d3
	VTRN1 V6.D2, V4.D2, V16.D2 // dim 0: a0 b0 c0 d0
	VTRN1 V7.D2, V5.D2, V17.D2 // dim 1
	VTRN2 V6.D2, V4.D2, V18.D2 // dim 2
	VTRN2 V7.D2, V5.D2, V19.D2 // dim 3
	VST1.P [V16.S4], (R10)(R9)
	VST1.P [V17.S4], (R10)(R9)
	VST1.P [V18.S4], (R10)(R9)
	VST1.P [V19.S4], (R10)(R9)
	SUBS $1, R11
	BNE tr_dims
	ADD R2<<2, R1, R1
	ADD $16, R0
	SUBS $1, R3
	BNE tr_keys
	RET

// func scaleRows4NEON(dst *float32, stride int, src *float32, d int, f *float32, rows int)
// Equals scaleRowsGo on rows > 0 rows of d > 0 columns (stride in floats):
// each row's factor replicated, then 16 columns a step, 4 a step, and the
// last d mod 4 one at a time, each product one rounding.
TEXT ·scaleRows4NEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD stride+8(FP), R1
	MOVD src+16(FP), R2
	MOVD d+24(FP), R3
	MOVD f+32(FP), R4
	MOVD rows+40(FP), R5
	LSL $2, R1, R1

sr_row:
	VLD1R.P 4(R4), [V31.S4]
	MOVD R0, R6
	MOVD R3, R7

sr_16:
	CMP $16, R7
	BLT sr_4
	VLD1.P 64(R2), [V0.S4, V1.S4, V2.S4, V3.S4]
	FMUL4S(31, 0, 0)
	FMUL4S(31, 1, 1)
	FMUL4S(31, 2, 2)
	FMUL4S(31, 3, 3)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R6)
	SUB $16, R7
	B sr_16

sr_4:
	CMP $4, R7
	BLT sr_1
	VLD1.P 16(R2), [V0.S4]
	FMUL4S(31, 0, 0)
	VST1.P [V0.S4], 16(R6)
	SUB $4, R7
	B sr_4

sr_1:
	CBZ R7, sr_next
	FMOVS.P 4(R2), F0
	FMULS F31, F0, F0
	FMOVS.P F0, 4(R6)
	SUB $1, R7
	B sr_1

sr_next:
	ADD R1, R0
	SUBS $1, R5
	BNE sr_row
	RET

// func fmaPeakNEON(n int)
// n iterations of 24 independent four-lane FMLAs on registers alone (24
// chains, more than four pipes × four cycles of latency need): 192 flops
// an iteration.
TEXT ·fmaPeakNEON(SB), NOSPLIT, $0-8
	MOVD n+0(FP), R0
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	VEOR V30.B16, V30.B16, V30.B16
	VEOR V31.B16, V31.B16, V31.B16
	CBZ R0, fmapeak_done

fmapeak_loop:
	VFMLA V30.S4, V31.S4, V0.S4
	VFMLA V30.S4, V31.S4, V1.S4
	VFMLA V30.S4, V31.S4, V2.S4
	VFMLA V30.S4, V31.S4, V3.S4
	VFMLA V30.S4, V31.S4, V4.S4
	VFMLA V30.S4, V31.S4, V5.S4
	VFMLA V30.S4, V31.S4, V6.S4
	VFMLA V30.S4, V31.S4, V7.S4
	VFMLA V30.S4, V31.S4, V8.S4
	VFMLA V30.S4, V31.S4, V9.S4
	VFMLA V30.S4, V31.S4, V10.S4
	VFMLA V30.S4, V31.S4, V11.S4
	VFMLA V30.S4, V31.S4, V12.S4
	VFMLA V30.S4, V31.S4, V13.S4
	VFMLA V30.S4, V31.S4, V14.S4
	VFMLA V30.S4, V31.S4, V15.S4
	VFMLA V30.S4, V31.S4, V16.S4
	VFMLA V30.S4, V31.S4, V17.S4
	VFMLA V30.S4, V31.S4, V18.S4
	VFMLA V30.S4, V31.S4, V19.S4
	VFMLA V30.S4, V31.S4, V20.S4
	VFMLA V30.S4, V31.S4, V21.S4
	VFMLA V30.S4, V31.S4, V22.S4
	VFMLA V30.S4, V31.S4, V23.S4
	SUBS $1, R0
	BNE fmapeak_loop

fmapeak_done:
	RET
