package cpu_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestBoundedCatchesMutants: the bounded steps (per-row key bounds and a
// softcap in the fused kernels, the AMX softmax and their drivers), broken
// on purpose, fail their kernel tests or the conformance suite
// (FP8ATTN_MUTANTS=1; each skipped on a CPU without the kernel set it
// breaks).
func TestBoundedCatchesMutants(t *testing.T) {
	const pkg = "./backend/cpu"
	bounded, steps, finite := []string{"TestScoresSoftmaxBounded4"}, []string{"TestStepsBounded4"}, []string{"TestAllFinite"}
	amx, dense, paged := []string{"TestAMXAttend64"}, []string{"TestConformance"}, []string{"TestPagedAttention"}
	// file and text: the bounded kernel's TEXT line, before which a
	// variant redefines a header's macro (name with its parameters) as body.
	const file, text = "backend/cpu/kernels_avx512_amd64.s", "TEXT ·scoresSoftmaxBounded4x64AVX512(SB)"
	redefineAt := func(text, name, body string) string {
		return "#undef " + name[:strings.IndexByte(name, '(')] + "\n#define " + name + " " + body + "\n" + text
	}
	redefine := func(name, body string) string { return redefineAt(text, name, body) }
	// The bounded steps' TEXT lines, before which a variant redefines a
	// macro for them (and, past the float32 one, for the pairs' too).
	const steps32, stepsPairs = "TEXT ·stepsBounded4x64AVX512(SB)", "TEXT ·stepsBounded4x64PairsAVX512(SB)"
	pvFirstKey := func(text string) string {
		return redefineAt(text, "BOUNDED_PV(c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone)",
			"MOVQ 40(SP), AX; XORQ R8, R8; MOVL 52(AX), BX; MOVQ 8(SP), DI; MOVQ s+0(FP), SI; LEAQ (SI)(R8*4), SI; "+
				"MOVQ d+24(FP), CX; IMULQ CX, R8; MOVQ v+64(FP), DX; LEAQ (DX)(R8*4), DX; MOVQ CX, R11; MOVQ alpha+56(FP), AX; "+
				"PV4X16(c64, u64, g64, p64, l64, s64, c16, l16, s16, pvdone)")
	}
	// The bounded steps run only in the AVX-512 sets (elsewhere their
	// tests skip, and the drivers' bounded groups are not taken), the AMX
	// panels only on AMX: a mutant of code this CPU does not run is
	// skipped, not counted as caught.
	isas := cpu.ISAs()
	noAVX512, noAMX := "", ""
	if !slices.Contains(isas, "avx512") {
		noAVX512 = "no AVX-512 kernel set on this CPU"
	}
	if !slices.Contains(isas, "amx") {
		noAMX = "no AMX kernel set on this CPU"
	}
	onAMX := func(m mutant.Mutant) mutant.Mutant { m.Skip = noAMX; return m }
	// The bounded steps' mask before their softcap, so that a masked
	// key's -Inf becomes the cap's floor -c and weighs e^(-c-m).
	capAfterMask := redefine("BOUNDED4X64(nocap, nomask)", "MASK4X64; CMPL 36(AX), $0; JEQ nocap; SOFTCAP4X64; \\\nnocap: \\\nnomask:")
	noPairs := ""
	if !slices.Contains(isas, "avx512bf16") {
		noPairs = "no AVX512_BF16 kernel set on this CPU"
	}
	onPairs := func(m mutant.Mutant) mutant.Mutant { m.Skip = noPairs; return m }
	ms := []mutant.Mutant{
		// The macros live in headers, which the assembler reads past the
		// overlay: these variants redefine one before the kernel's TEXT.
		{Name: "the mask's lower bound one key high", File: file, Pkg: pkg,
			Old: text, New: redefine("MASK16(x, idx)", "VPCMPD $2, Z28, idx, K1; VPCMPD $5, Z29, idx, K2; KORW K2, K1, K1; VMOVAPS Z30, K1, x"), Tests: bounded},
		{Name: "the mask's upper bound one key high", File: file, Pkg: pkg,
			Old: text, New: redefine("MASK16(x, idx)", "VPCMPD $1, Z28, idx, K1; VPCMPD $6, Z29, idx, K2; KORW K2, K1, K1; VMOVAPS Z30, K1, x"), Tests: bounded},
		{Name: "the softcap after the mask", File: file, Pkg: pkg,
			Old: text, New: capAfterMask, Tests: bounded},
		// The same through the paged cache's table, whose softcapped
		// cases hold windows and long masked runs of keys.
		{Name: "the softcap after the mask, in the paged table", File: file, Pkg: pkg,
			Old: text, New: capAfterMask, Tests: paged},
		{Name: "tanh without its sign in the kernel", File: file, Pkg: pkg,
			Old: text, New: redefine("SOFTCAP16(x)", "VMULPS Z27, x, x; VANDPS Z30, x, Z18; VMULPS Z28, Z18, Z18; EXP16(Z18, Z16, Z17); "+
				"VSUBPS Z18, Z22, Z16; VADDPS Z22, Z18, Z18; VMULPS Z29, Z16, Z16; VDIVPS Z18, Z16, x"), Tests: bounded},
		{Name: "the mask left out where the rows' lower bounds alone are 0", File: file, Pkg: pkg,
			Old: text, New: redefine("BOUNDED4X64(nocap, nomask)", "CMPL 36(AX), $0; JEQ nocap; SOFTCAP4X64; \\\nnocap: VMOVDQU32 0(AX), X16; "+
				"VPCMPD $4, fullBounds<>(SB), X16, K1; KORTESTB K1, K1; JZ nomask; MASK4X64; \\\nnomask:"), Tests: bounded},
		{Name: "the first key vector rounded up", File: "backend/cpu/kernels_amd64.go", Pkg: pkg,
			Old: "c0 := min(lo/16, 3)", New: "c0 := min((lo+15)/16, 3)", Tests: bounded},
		{Name: "the last key vector left out", File: "backend/cpu/kernels_amd64.go", Pkg: pkg,
			Old: "min((hi+15)/16, 4)", New: "min(hi/16, 4)", Tests: bounded},
		{Name: "bounded steps without their bounds", File: file, Pkg: pkg,
			Old: steps32, New: redefineAt(steps32, "BOUNDED4X64(nocap, nomask)", ""), Tests: steps},
		{Name: "bounded steps' P·V from the panel's first key", File: file, Pkg: pkg,
			Old: steps32, New: pvFirstKey(steps32), Tests: steps},
		{Name: "allFinite blind to infinities", File: "backend/cpu/kernels_avx512_amd64.s", Pkg: pkg,
			Old: "VCMPPS $5, Z2, Z0, K1", New: "VCMPPS $6, Z2, Z0, K1", Tests: finite},
		onAMX(mutant.Mutant{Name: "amxAttend64 keeps the first panel's bounds", File: "backend/cpu/amx_amd64.s", Pkg: pkg,
			Old: "ADDQ $224, 104(R8)", New: "ADDQ $0, 104(R8)", Tests: amx}),
		{Name: "one P·V a group over values that are not finite", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "vf := kp.vFinite != nil && kp.vFinite[kb]", New: "vf := kp.vFinite != nil", Tests: dense},
		{Name: "a bounded group's P·V one key short", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "k.u0, k.u1 = min(k.u0, k.nl[r]), max(k.u1, k.nr[r])", New: "k.u0, k.u1 = min(k.u0, k.nl[r]), max(k.u1, k.nr[r]-1)", Tests: dense},
		onAMX(mutant.Mutant{Name: "AMX bounds a key wider at a window's edge", File: "backend/cpu/amx.go", Pkg: pkg,
			Old: "b.lo[r%4] = int32(min(panel, max(0, lo[r]-j0)))", New: "b.lo[r%4] = int32(min(panel, max(0, lo[r]-j0-1)))", Tests: dense}),
		onAMX(mutant.Mutant{Name: "AMX takes panels some rows see none of", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "if max(rowLo[r], j0) >= min(rowHi[r], j0+panel) {", New: "if false && max(rowLo[r], j0) >= min(rowHi[r], j0+panel) {", Tests: dense}),
		{Name: "bounded steps without the softcap", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "k.bounds(&bs[len(bs)-1], min(4, rowsN-e), capM2, capCK)", New: "k.bounds(&bs[len(bs)-1], min(4, rowsN-e), 0, 0)", Tests: dense},
		onPairs(mutant.Mutant{Name: "the pairs' bounded steps advance q by float32 rows", File: file, Pkg: pkg,
			Old: "BOUNDED_REST(3, pbsteps_", New: "BOUNDED_REST(4, pbsteps_", Tests: []string{"TestStepsBounded4Pairs"}}),
		onPairs(mutant.Mutant{Name: "the pairs' bounded steps' P·V from the panel's first key", File: file, Pkg: pkg,
			Old: stepsPairs, New: pvFirstKey(stepsPairs), Tests: []string{"TestStepsBounded4Pairs"}}),
		onPairs(mutant.Mutant{Name: "the pairs' bounded steps on the block's first rows", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "ks.pairs.stepsBounded4(s, sc.q16[g*D/2:e*D/2]", New: "ks.pairs.stepsBounded4(s, sc.q16[:(e-g)*D/2]", Tests: dense}),
		{Name: "a row with no key takes the one-P·V steps", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "return !k.unseen && (k.same || vf)", New: "return k.same || vf", Tests: dense},
		{Name: "rows that see other keys take one P·V over values not finite", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "k.same = k.same && k.nl[r] == k.nl[0] && k.nr[r] == k.nr[0]", New: "k.same = k.same && k.nr[r] == k.nr[0]", Tests: dense},
	}
	for i := range ms {
		if ms[i].Skip == "" {
			ms[i].Skip = noAVX512
		}
	}
	mutant.Run(t, ms)
}
