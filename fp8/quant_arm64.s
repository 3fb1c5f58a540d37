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

// ROUND(X, x, A, a, R, r, S, s) is one vector of roundE4M3NEON up to its
// overflow and NaN selects: X the source, then q; q rounded in R; |q| in
// A; the overflow mask (|q| > 464, ±Inf and NaN included) in S.
#define ROUND(X, x, A, a, R, r, S, s) \
	FDIV4S(31, x, x); \
	MAGIC(x, X, r, R, s); \
	VAND V28.B16, X.B16, A.B16; \
	CMHI4S(23, a, s)

// SIGN(X, R) ORs q's sign (X) into R, leaving the sign in X. V22 is the
// sign bit.
#define SIGN(X, R) \
	VAND V22.B16, X.B16, X.B16; \
	VORR X.B16, R.B16, R.B16

// SELECTS(X, A, a, R, S, s) is the rest of a vector of roundE4M3NEON where
// a lane overflows or is NaN: ovf in the overflow lanes, the sign, then
// 0x7fc00000 | (sign & nanSign) (V21 the bits of NaN) in the NaN lanes.
#define SELECTS(X, A, a, R, S, s) \
	VBIT S.B16, V30.B16, R.B16; \
	SIGN(X, R); \
	VAND V29.B16, X.B16, X.B16; \
	VORR V21.B16, X.B16, X.B16; \
	CMHI4S(27, a, s); \
	VBIT S.B16, X.B16, R.B16

// func roundE4M3NEON(dst, src *float32, n int, scale float32, ovf, nanSign uint32)
// Equals roundE4M3Go (e4m3Table[e4m3Format.convert(src[i]/scale, mode)])
// for i < n, n a positive multiple of 16. Per lane: q = src/scale; q
// itself (either sign) rounded by MAGIC; |q| > 464 gives ovf (the bits of
// the overflow's value); q's sign ORed in (a zero result loses it in the
// sum); NaN gives 0x7fc00000 | (q & nanSign). A step of 16 with no lane
// that overflows or is NaN (nearly every one, where the scale comes from
// the data's amax) skips the selects: its four overflow masks ORed and
// reduced (UMAXV) to one word that is zero.
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
	VORR V13.B16, V12.B16, V16.B16
	VORR V15.B16, V14.B16, V17.B16
	VORR V17.B16, V16.B16, V16.B16
	UMAXV4S(16, 16)
	FMOVS F16, R3
	CBNZW R3, round_selects
	SIGN(V0, V4)
	SIGN(V1, V5)
	SIGN(V2, V6)
	SIGN(V3, V7)

round_store:
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUBS $16, R2
	BNE round
	RET

round_selects:
	SELECTS(V0, V8, 8, V4, V12, 12)
	SELECTS(V1, V9, 9, V5, V13, 13)
	SELECTS(V2, V10, 10, V6, V14, 14)
	SELECTS(V3, V11, 11, V7, V15, 15)
	B round_store

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

// The high 16 bits of the value of each E4M3 magnitude m < 128 (the low
// 16 are zero: an E4M3 value has at most 4 significant bits), as two
// tables of bytes: e4m3Byte3[m] is bits 24-31 of the float32, e4m3Byte2[m]
// bits 16-23 (decodeTable's values; m = 0x7f is NaN, 0x7fc00000).
DATA e4m3Byte3<>+0(SB)/8, $0x3c3c3c3c3b3b3b00
DATA e4m3Byte3<>+8(SB)/8, $0x3c3c3c3c3c3c3c3c
DATA e4m3Byte3<>+16(SB)/8, $0x3d3d3d3d3d3d3d3d
DATA e4m3Byte3<>+24(SB)/8, $0x3d3d3d3d3d3d3d3d
DATA e4m3Byte3<>+32(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA e4m3Byte3<>+40(SB)/8, $0x3e3e3e3e3e3e3e3e
DATA e4m3Byte3<>+48(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA e4m3Byte3<>+56(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA e4m3Byte3<>+64(SB)/8, $0x4040404040404040
DATA e4m3Byte3<>+72(SB)/8, $0x4040404040404040
DATA e4m3Byte3<>+80(SB)/8, $0x4141414141414141
DATA e4m3Byte3<>+88(SB)/8, $0x4141414141414141
DATA e4m3Byte3<>+96(SB)/8, $0x4242424242424242
DATA e4m3Byte3<>+104(SB)/8, $0x4242424242424242
DATA e4m3Byte3<>+112(SB)/8, $0x4343434343434343
DATA e4m3Byte3<>+120(SB)/8, $0x7f43434343434343
GLOBL e4m3Byte3<>(SB), RODATA|NOPTR, $128
DATA e4m3Byte2<>+0(SB)/8, $0x60402000c0800000
DATA e4m3Byte2<>+8(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+16(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+24(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+32(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+40(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+48(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+56(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+64(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+72(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+80(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+88(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+96(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+104(SB)/8, $0xf0e0d0c0b0a09080
DATA e4m3Byte2<>+112(SB)/8, $0x7060504030201000
DATA e4m3Byte2<>+120(SB)/8, $0xc0e0d0c0b0a09080
GLOBL e4m3Byte2<>(SB), RODATA|NOPTR, $128

// func decodeE4M3NEON(dst *float32, src *E4M3, n int, scale float32)
// Equals decodeE4M3Table on src[:n], n a positive multiple of 16, 16 codes a
// step: the magnitudes m = c & 0x7f index the two 128-byte tables (TBL on
// the first 64 entries, TBX with index m ^ 64 on the last 64: an index out
// of range leaves TBL's byte), the sign byte c ^ m is ORed into bits
// 24-31, two rounds of ZIP build the float32s (byte 2 below byte 3, then
// zero below that half), and each is multiplied by scale, one rounding as
// in the table loop. Tables in V16-V31; V12 0x7f, V13 0x40 and V14 zero
// (bytes), V15 scale.
TEXT ·decodeE4M3NEON(SB), NOSPLIT, $0-28
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS scale+24(FP), F15
	VDUP V15.S[0], V15.S4
	MOVD $e4m3Byte3<>(SB), R3
	VLD1.P 64(R3), [V16.B16, V17.B16, V18.B16, V19.B16]
	VLD1 (R3), [V20.B16, V21.B16, V22.B16, V23.B16]
	MOVD $e4m3Byte2<>(SB), R3
	VLD1.P 64(R3), [V24.B16, V25.B16, V26.B16, V27.B16]
	VLD1 (R3), [V28.B16, V29.B16, V30.B16, V31.B16]
	MOVW $0x7f, R3
	VDUP R3, V12.B16
	MOVW $0x40, R3
	VDUP R3, V13.B16
	VEOR V14.B16, V14.B16, V14.B16

decode:
	VLD1.P 16(R1), [V0.B16]
	VAND V12.B16, V0.B16, V1.B16 // m
	VEOR V1.B16, V0.B16, V2.B16  // the sign byte
	VEOR V13.B16, V1.B16, V3.B16 // m ^ 64: m - 64 for m >= 64, out of range below
	VTBL V1.B16, [V16.B16, V17.B16, V18.B16, V19.B16], V4.B16
	VTBX V3.B16, [V20.B16, V21.B16, V22.B16, V23.B16], V4.B16
	VORR V2.B16, V4.B16, V4.B16  // bits 24-31, signed
	VTBL V1.B16, [V24.B16, V25.B16, V26.B16, V27.B16], V5.B16
	VTBX V3.B16, [V28.B16, V29.B16, V30.B16, V31.B16], V5.B16
	VZIP1 V4.B16, V5.B16, V6.B16 // codes 0-7: halves byte2 | byte3<<8
	VZIP2 V4.B16, V5.B16, V7.B16 // codes 8-15
	VZIP1 V6.H8, V14.H8, V8.H8   // codes 0-3: words half<<16
	VZIP2 V6.H8, V14.H8, V9.H8
	VZIP1 V7.H8, V14.H8, V10.H8
	VZIP2 V7.H8, V14.H8, V11.H8
	FMUL4S(15, 8, 8)
	FMUL4S(15, 9, 9)
	FMUL4S(15, 10, 10)
	FMUL4S(15, 11, 11)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)
	SUBS $16, R2
	BNE decode
	RET
