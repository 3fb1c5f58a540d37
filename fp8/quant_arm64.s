//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// fp8's vector routines for arm64, on NEON (Advanced SIMD, which every
// arm64 CPU has), 16 elements a step in four vectors of four lanes. Each
// equals the Go loop named in its comment, bit for bit (NaN bits
// included); quant_arm64.go describes the arithmetic. Arm's float32
// arithmetic is IEEE's with the rounding and subnormal handling Go runs
// with (FPCR zero: round to nearest even, no flush to zero), and its
// vector FDIV propagates NaNs as the scalar FDIV of the Go loops does.

// CONVERT_ARGS loads the arguments shared by the conversions (dst, src, n,
// scale, ovf, nanSign) into R0, R1, R2, V31 (scale), V30 (ovf) and V29
// (nanSign), and their constants: V28 the magnitude mask, V27 the bits of
// +Inf (the exponent bits; larger magnitude bits are NaN), V26 1.5·2^20
// and V25 1.5·2^14 (the magic sum), V23 the bits of 464, the largest
// magnitude that does not overflow (it ties to 448).
#define CONVERT_ARGS \
	MOVD dst+0(FP), R0; MOVD src+8(FP), R1; MOVD n+16(FP), R2; \
	FMOVS scale+24(FP), F31; VDUP V31.S[0], V31.S4; \
	MOVWU ovf+28(FP), R3; VDUP R3, V30.S4; \
	MOVWU nanSign+32(FP), R3; VDUP R3, V29.S4; \
	MOVW $0x7fffffff, R3; VDUP R3, V28.S4; \
	MOVW $0x7f800000, R3; VDUP R3, V27.S4; \
	MOVW $0x49c00000, R3; VDUP R3, V26.S4; \
	MOVW $0x46c00000, R3; VDUP R3, V25.S4; \
	MOVW $0x43e80000, R3; VDUP R3, V23.S4

// Rounding to E4M3's grid by a magic sum, as on amd64 (quant_amd64.s):
// for a magnitude a in the binade [2^e, 2^(e+1)), E4M3's quantum is
// 2^(e-3) (2^-9 below 2^-6, its subnormals); M = 1.5·2^(e+20), or 1.5·2^14
// where that is larger, lies in a binade whose float32 ulp is that
// quantum, so the float sum x + M (x = ±a) rounds x to the quantum, nearest
// even, and (x + M) - M is exact. M comes from the exponent bits times
// 1.5·2^20 (0 for zeros and float32 subnormals, hence the 1.5·2^14 floor).
//
// MAGIC(x, X, r, R, s) sets R to the register x (q or |q|) rounded to
// E4M3's grid, the quotient q being in X; s is clobbered.
#define MAGIC(x, X, r, R, s) \
	VAND V27.B16, X.B16, R.B16; \
	FMUL4S(26, r, r); \
	FMAX4S(25, r, r); \
	FADD4S(r, x, s); \
	FSUB4S(r, s, r)

// ENCODE(X, x, A, a, R, r, S, s) is one vector of encodeE4M3NEON: X the
// source, then q, then clobbered; the code (one per 32-bit lane) in R; A
// and S clobbered. V24 is 2^-120, V22 0x80 and V21 0x7f.
#define ENCODE(X, x, A, a, R, r, S, s) \
	FDIV4S(31, x, x); \
	VAND V28.B16, X.B16, A.B16; \
	MAGIC(a, X, r, R, s); \
	FMUL4S(24, r, r); \
	VUSHR $20, R.S4, R.S4; \
	CMHI4S(23, a, s); \
	VBIT S.B16, V30.B16, R.B16; \
	VUSHR $24, X.S4, X.S4; \
	VAND V22.B16, X.B16, X.B16; \
	VORR X.B16, R.B16, R.B16; \
	VAND V29.B16, X.B16, X.B16; \
	VORR V21.B16, X.B16, X.B16; \
	CMHI4S(27, a, s); \
	VBIT S.B16, X.B16, R.B16

// func encodeE4M3NEON(dst *E4M3, src *float32, n int, scale float32, ovf, nanSign uint32)
// Equals encodeE4M3Go (e4m3Format.convert(src[i]/scale, mode)) for i < n,
// n a positive multiple of 16. Per lane: q = src/scale (FDIV); a = |q|
// rounded by MAGIC; its code is the bits of a·2^-120 shifted right by 20
// (a normal value 2^(e-7)·(1+m/8) becomes the float32 with exponent field
// e and mantissa m<<20, a subnormal k·2^-9 the float32 subnormal k<<20,
// both exact); |q| > 464 (±Inf and NaN included) gives ovf; the sign to
// bit 7; |q| above +Inf's bits (NaN) gives 0x7f | (sign & nanSign). The
// four vectors of codes narrow to 16 bytes by two rounds of UZP1 (the low
// half of each lane).
TEXT ·encodeE4M3NEON(SB), NOSPLIT, $0-36
	CONVERT_ARGS
	MOVW $0x03800000, R3
	VDUP R3, V24.S4 // 2^-120
	MOVW $0x80, R3
	VDUP R3, V22.S4
	MOVW $0x7f, R3
	VDUP R3, V21.S4

encode:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	ENCODE(V0, 0, V8, 8, V4, 4, V12, 12)
	ENCODE(V1, 1, V9, 9, V5, 5, V13, 13)
	ENCODE(V2, 2, V10, 10, V6, 6, V14, 14)
	ENCODE(V3, 3, V11, 11, V7, 7, V15, 15)
	VUZP1 V5.H8, V4.H8, V16.H8
	VUZP1 V7.H8, V6.H8, V17.H8
	VUZP1 V17.B16, V16.B16, V18.B16
	VST1.P [V18.B16], 16(R0)
	SUBS $16, R2
	BNE encode
	RET

// ROUND(X, x, A, a, R, r, S, s) is one vector of roundE4M3NEON: X the
// source, then q, then clobbered; the value in R; A and S clobbered. V22 is
// the sign bit and V21 the bits of NaN, 0x7fc00000.
#define ROUND(X, x, A, a, R, r, S, s) \
	FDIV4S(31, x, x); \
	MAGIC(x, X, r, R, s); \
	VAND V28.B16, X.B16, A.B16; \
	CMHI4S(23, a, s); \
	VBIT S.B16, V30.B16, R.B16; \
	VAND V22.B16, X.B16, X.B16; \
	VORR X.B16, R.B16, R.B16; \
	VAND V29.B16, X.B16, X.B16; \
	VORR V21.B16, X.B16, X.B16; \
	CMHI4S(27, a, s); \
	VBIT S.B16, X.B16, R.B16

// func roundE4M3NEON(dst, src *float32, n int, scale float32, ovf, nanSign uint32)
// Equals roundE4M3Go (e4m3Table[e4m3Format.convert(src[i]/scale, mode)])
// for i < n, n a positive multiple of 16. Per lane: q = src/scale; q
// itself (either sign) rounded by MAGIC; |q| > 464 gives ovf (the bits of
// the overflow's value); q's sign ORed in (a zero result loses it in the
// sum); NaN gives 0x7fc00000 | (q & nanSign).
TEXT ·roundE4M3NEON(SB), NOSPLIT, $0-36
	CONVERT_ARGS
	MOVW $0x80000000, R3
	VDUP R3, V22.S4
	MOVW $0x7fc00000, R3
	VDUP R3, V21.S4

round:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	ROUND(V0, 0, V8, 8, V4, 4, V12, 12)
	ROUND(V1, 1, V9, 9, V5, 5, V13, 13)
	ROUND(V2, 2, V10, 10, V6, 6, V14, 14)
	ROUND(V3, 3, V11, 11, V7, 7, V15, 15)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS $16, R2
	BNE round
	RET

// AMAX(X, x, T, t, ACC) folds one vector X of amaxNEON into ACC: the
// magnitude bits, 0 where they are +Inf's or above (not finite), into an
// unsigned maximum. T is clobbered.
#define AMAX(X, x, T, t, ACC) \
	VAND V28.B16, X.B16, X.B16; \
	CMHI4S(x, 27, t); \
	VAND T.B16, X.B16, X.B16; \
	VUMAX X.S4, ACC.S4, ACC.S4

// func amaxNEON(x *float32, n int) uint32
// Equals amaxGo on x[:n] (n a positive multiple of 16), as the bits of the
// result: the largest finite |x[i]|, or 0. Magnitudes of finite floats
// order as unsigned integers; four running maxima, then across them.
TEXT ·amaxNEON(SB), NOSPLIT, $0-20
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVW $0x7fffffff, R3
	VDUP R3, V28.S4
	MOVW $0x7f800000, R3
	VDUP R3, V27.S4
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

amax:
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	AMAX(V4, 4, V8, 8, V0)
	AMAX(V5, 5, V9, 9, V1)
	AMAX(V6, 6, V10, 10, V2)
	AMAX(V7, 7, V11, 11, V3)
	SUBS $16, R1
	BNE amax
	VUMAX V1.S4, V0.S4, V0.S4
	VUMAX V3.S4, V2.S4, V2.S4
	VUMAX V2.S4, V0.S4, V0.S4
	UMAXV4S(0, 0)
	FMOVS F0, ret+16(FP)
	RET

// DECODE(C, c, M, m, S, s) is one vector of decodeE4M3NEON: the codes C
// (one per 32-bit lane) become their values times scale; M and S are
// clobbered. V30 is 0x7f, V29 2^120 and V28 NaN's bits, 0x7fc00000.
#define DECODE(C, c, M, m, S, s) \
	VAND V30.B16, C.B16, M.B16; \
	VEOR M.B16, C.B16, S.B16; \
	VSHL $24, S.S4, S.S4; \
	VSHL $20, M.S4, C.S4; \
	FMUL4S(29, c, c); \
	VCMEQ V30.S4, M.S4, M.S4; \
	VBIT M.B16, V28.B16, C.B16; \
	VORR S.B16, C.B16, C.B16; \
	FMUL4S(31, c, c)

// func decodeE4M3NEON(dst *float32, src *E4M3, n int, scale float32)
// Equals decodeE4M3Table on src[:n], n a positive multiple of 16: the
// codes widen to 32-bit lanes (UXTL, twice); for the magnitude bits m = c &
// 0x7f, the float32 with bits m<<20 is the value times 2^-120 (a normal
// code's exponent and mantissa fields; a subnormal code's m·2^-9 as the
// float32 subnormal m·2^-129), so times 2^120 it is the value, exactly;
// m = 0x7f is NaN (0x7fc00000); the sign bit moves to bit 31; then the
// product with scale, one rounding as in the table loop.
TEXT ·decodeE4M3NEON(SB), NOSPLIT, $0-28
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS scale+24(FP), F31
	VDUP V31.S[0], V31.S4
	MOVW $0x7f, R3
	VDUP R3, V30.S4
	MOVW $0x7b800000, R3
	VDUP R3, V29.S4 // 2^120
	MOVW $0x7fc00000, R3
	VDUP R3, V28.S4

decode:
	VLD1.P 16(R1), [V0.B16]
	VUXTL V0.B8, V1.H8
	VUXTL2 V0.B16, V2.H8
	VUXTL V1.H4, V4.S4
	VUXTL2 V1.H8, V5.S4
	VUXTL V2.H4, V6.S4
	VUXTL2 V2.H8, V7.S4
	DECODE(V4, 4, V8, 8, V12, 12)
	DECODE(V5, 5, V9, 9, V13, 13)
	DECODE(V6, 6, V10, 10, V14, 14)
	DECODE(V7, 7, V11, 11, V15, 15)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS $16, R2
	BNE decode
	RET
