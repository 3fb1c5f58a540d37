//go:build !purego

#include "textflag.h"

// func decodeF16C(dst *float32, src *byte, n int, unit float32)
// Equals decodeGo on n values, n a positive multiple of 8 (see the
// declaration in decode_amd64.go).
TEXT ·decodeF16C(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS unit+24(FP), Y15

loop32:
	CMPQ CX, $32
	JLT loop8
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMULPS Y15, Y0, Y0
	VMULPS Y15, Y1, Y1
	VMULPS Y15, Y2, Y2
	VMULPS Y15, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP loop32

loop8:
	TESTQ CX, CX
	JZ done
	VCVTPH2PS (SI), Y0
	VMULPS Y15, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop8

done:
	VZEROUPPER
	RET
