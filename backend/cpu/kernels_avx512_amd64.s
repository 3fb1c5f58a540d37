//go:build !purego

#include "textflag.h"
#include "softmax_amd64.h"
#include "kernels_avx512_amd64.h"

// The CPU backend's AVX-512 micro-kernels (the "avx512" kernel set, and
// the bfloat16 pair kernels of AVX512_BF16). Each routine equals the Go
// loop named in its comment (kernels.go), with multiply-adds fused; the Go
// wrappers in kernels_amd64.go check the bounds first. The macros are in
// kernels_avx512_amd64.h.
//
// Layouts: q and acc rows are d floats apart, v rows d floats apart, score
// rows (s, p) panel = 64 floats (256 bytes) apart, kt rows 64 floats apart.

// quietBit is a float32's quiet-NaN bit, highHalf the mask of its high 16
// bits (the bfloat16 pairs: pairRowsAVX512, pairPanelAVX512).
DATA quietBit<>+0(SB)/4, $0x00400000
GLOBL quietBit<>(SB), RODATA|NOPTR, $4
DATA highHalf<>+0(SB)/4, $0xffff0000
GLOBL highHalf<>(SB), RODATA|NOPTR, $4

// posInf is +Inf (finite16AVX512).
DATA posInf<>+0(SB)/4, $0x7f800000
GLOBL posInf<>(SB), RODATA|NOPTR, $4

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

// func scoresSoftmaxBounded4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32, b *rowBounds)
// Equals softmax4BoundedGo on the dot products of scores4x64AVX512
// (kernelSet.scoresSoftmaxBounded4): the products in registers, softcapped
// and masked to each row's key bounds there (BOUNDED4X64), then the step of
// scoresSoftmax4x64AVX512 (SOFTMAX4X64). Only the key vectors [c0, c0+n)
// that hold some row's keys (b.c0 and b.n: scoresSoftmaxBounded4AVX512)
// get their products, shifted into place; the others are masked whatever
// they hold.
TEXT ·scoresSoftmaxBounded4x64AVX512(SB), NOSPLIT, $0-72
	MOVQ b+64(FP), AX
	MOVQ q+8(FP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	MOVL 40(AX), BX
	MOVL 44(AX), R11
	MOVQ BX, R12
	SHLQ $6, R12
	ADDQ R12, DX
	CMPQ R11, $3
	JEQ sb4_n3
	CMPQ R11, $2
	JEQ sb4_n2
	CMPQ R11, $1
	JEQ sb4_n1
	SCORES4X64_REGS(sb4_pairs, sb4_loop, sb4_dots)
	JMP sb4_scored

sb4_n3:
	SCORES4X48_REGS(sb4_pairs3, sb4_loop3, sb4_dots3)
	JMP sb4_shift

sb4_n2:
	SCORES4X32_REGS(sb4_pairs2, sb4_loop2, sb4_dots2)
	JMP sb4_shift

sb4_n1:
	SCORES4X16_REGS(sb4_pairs1, sb4_loop1, sb4_dots1)

sb4_shift:
	TESTQ BX, BX
	JZ sb4_scored
	SHIFT_CHUNKS
	DECQ BX
	JMP sb4_shift

sb4_scored:
	MOVQ s+0(FP), DI
	VBROADCASTSS scale+32(FP), Z27
	MOVQ b+64(FP), AX
	BOUNDED4X64(sb4_nocap, sb4_nomask)
	MOVQ m+40(FP), R11
	MOVQ l+48(FP), R12
	MOVQ alpha+56(FP), R13
	SOFTMAX4X64(sb4_slow, sb4_rows)
	VZEROUPPER
	RET

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

// func stepsBounded4x64AVX512(s, q, kt *float32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr, b *rowBounds, bstride int)
// Equals, for each of groups groups of four query rows (q, acc, m and l
// advancing by four rows a group, b by bstride bytes: 0 or a rowBounds),
// scoresSoftmaxBounded4x64AVX512 under the group's b (its key vectors
// [c0, c0+n) alone) followed by pv4x16AVX512 on the keys [p0, p0+pn) of
// b, on d a positive multiple of 16, in one call (stepsBounded4AVX512),
// with steps4x64AVX512's prefetches. The locals hold the group's q, acc, m,
// l, the groups left and the group's b.
TEXT ·stepsBounded4x64AVX512(SB), NOSPLIT, $48-112
	STEPS_ENTRY
	MOVQ b+96(FP), AX
	MOVQ AX, 40(SP)

bsteps_group:
	MOVQ pf+88(FP), AX
	PREFETCH5(bsteps_pl0, bsteps_pd0, bsteps_pl1, bsteps_pd1, bsteps_pl2, bsteps_pd2, bsteps_pl3, bsteps_pd3, bsteps_pl4, bsteps_pd4)
	MOVQ 40(SP), AX
	MOVQ 0(SP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	MOVL 40(AX), BX
	MOVL 44(AX), R11
	MOVQ BX, R12
	SHLQ $6, R12
	ADDQ R12, DX
	CMPQ R11, $3
	JEQ bsteps_n3
	CMPQ R11, $2
	JEQ bsteps_n2
	CMPQ R11, $1
	JEQ bsteps_n1
	SCORES4X64_REGS(bsteps_pairs4, bsteps_loop4, bsteps_dots4)
	JMP bsteps_scored

bsteps_n3:
	SCORES4X48_REGS(bsteps_pairs3, bsteps_loop3, bsteps_dots3)
	JMP bsteps_shift

bsteps_n2:
	SCORES4X32_REGS(bsteps_pairs2, bsteps_loop2, bsteps_dots2)
	JMP bsteps_shift

bsteps_n1:
	SCORES4X16_REGS(bsteps_pairs1, bsteps_loop1, bsteps_dots1)

bsteps_shift:
	TESTQ BX, BX
	JZ bsteps_scored
	SHIFT_CHUNKS
	DECQ BX
	JMP bsteps_shift

bsteps_scored:
	BOUNDED_REST(4, bsteps_nocap, bsteps_nomask, bsteps_slow, bsteps_rows, bsteps_c64, bsteps_u64, bsteps_g64, bsteps_p64, bsteps_l64, bsteps_s64, bsteps_c16, bsteps_l16, bsteps_s16, bsteps_pvdone)
	JNZ bsteps_group
	VZEROUPPER
	RET

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

// func stepsBounded4x64PairsAVX512(s *float32, q, kt *uint32, d int, scale float32, m, l, alpha *float32, v, acc *float32, groups int, pf *[10]uintptr, b *rowBounds, bstride int)
// Equals stepsBounded4x64AVX512 with the dot products of all 64 keys of
// the panel taken on bfloat16 pairs (SCORES4X64_PAIRS_REGS; q and kt as
// steps4x64PairsAVX512 takes them), whatever the group's key vectors: the
// bounded step's softcap and mask (BOUNDED4X64) then take them as they
// take the float32 ones. d a positive multiple of 16. Needs AVX512_BF16.
TEXT ·stepsBounded4x64PairsAVX512(SB), NOSPLIT, $48-112
	STEPS_ENTRY
	MOVQ b+96(FP), AX
	MOVQ AX, 40(SP)

pbsteps_group:
	MOVQ pf+88(FP), AX
	PREFETCH5(pbsteps_pl0, pbsteps_pd0, pbsteps_pl1, pbsteps_pd1, pbsteps_pl2, pbsteps_pd2, pbsteps_pl3, pbsteps_pd3, pbsteps_pl4, pbsteps_pd4)
	MOVQ 0(SP), SI
	MOVQ kt+16(FP), DX
	MOVQ d+24(FP), CX
	SCORES4X64_PAIRS_REGS(pbsteps_sloop)
	BOUNDED_REST(3, pbsteps_nocap, pbsteps_nomask, pbsteps_slow, pbsteps_rows, pbsteps_c64, pbsteps_u64, pbsteps_g64, pbsteps_p64, pbsteps_l64, pbsteps_s64, pbsteps_c16, pbsteps_l16, pbsteps_s16, pbsteps_pvdone)
	JNZ pbsteps_group
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

// func finite16AVX512(x *float32, n int) bool
// Equals allFiniteGo on x[:n], n a positive multiple of 16: each vector's
// magnitudes compared with +Inf, not less (Inf) or unordered (NaN) lanes
// gathered in K2.
TEXT ·finite16AVX512(SB), NOSPLIT, $0-17
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $4, CX
	VPBROADCASTD absMask<>(SB), Z1
	VPBROADCASTD posInf<>(SB), Z2
	KXORW K2, K2, K2

finite_loop:
	VANDPS (SI), Z1, Z0
	VCMPPS $5, Z2, Z0, K1
	KORW K1, K2, K2
	ADDQ $64, SI
	DECQ CX
	JNZ finite_loop
	KORTESTW K2, K2
	SETEQ ret+16(FP)
	VZEROUPPER
	RET

// func softmaxBounded4x64AVX512(s *float32, scale float32, m, l, alpha *float32, b *rowBounds)
// Equals softmax4BoundedGo on dot products already in s (four rows of
// panel): softmax4x64AVX512 with the rows' scores masked (and softcapped)
// first (BOUNDED4X64), weights written back into s.
TEXT ·softmaxBounded4x64AVX512(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), DI
	MOVQ m+16(FP), R11
	MOVQ l+24(FP), R12
	MOVQ alpha+32(FP), R13
	MOVQ b+40(FP), AX
	VBROADCASTSS scale+8(FP), Z27
	LOAD4X64
	BOUNDED4X64(smb4_nocap, smb4_nomask)
	SOFTMAX4X64(smb4_slow, smb4_rows)
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
