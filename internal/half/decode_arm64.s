//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// func decodeNEON(dst *float32, src *byte, n int, unit float32)
// Equals decodeGo on n values, n a positive multiple of 8 (see the
// declaration in decode_arm64.go).
TEXT ·decodeNEON(SB), NOSPLIT, $0-28
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	FMOVS unit+24(FP), F3
	VDUP V3.S[0], V3.S4

loop:
	VLD1.P 16(R1), [V0.H8]
	FCVTL4S(0, 1)
	FCVTL24S(0, 2)
	FMUL4S(3, 1, 1)
	FMUL4S(3, 2, 2)
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS $8, R2, R2
	BNE loop
	RET
