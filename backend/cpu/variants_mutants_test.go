package cpu_test

import (
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestVariantsCatchMutants: the attention variants, broken on purpose in
// the kernels' driver, fail the conformance suite or the paged table
// (FP8ATTN_MUTANTS=1).
func TestVariantsCatchMutants(t *testing.T) {
	const pkg = "./backend/cpu"
	dense, paged := []string{"TestConformance"}, []string{"TestPagedAttention"}
	// The fused steps (steps4, scoresSoftmax4) are the AVX-512 sets'
	// alone: elsewhere the driver never takes them, and a mutant of their
	// conditions is skipped, not counted as caught.
	noFused := ""
	if !slices.Contains(cpu.ISAs(), "avx512") {
		noFused = "no kernel set with fused steps on this CPU"
	}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a window one key wider at its edge", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "k.nl[r] = min(k.nr[r], max(0, rowLo[i]-j0))", New: "k.nl[r] = min(k.nr[r], max(0, rowLo[i]-j0-1))", Tests: dense},
		{Name: "a block skips the panel its window starts in", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "kp.kb0 = max(kp.kb0, rowLo[0]/panel)", New: "kp.kb0 = max(kp.kb0, (rowLo[0]+panel-1)/panel)", Tests: dense},
		{Name: "fused steps for rows past a window's edge", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "rowHi[g] >= j0+panel && rowLo[g+3] <= j0", New: "rowHi[g] >= j0+panel && rowLo[g] <= j0", Tests: dense, Skip: noFused},
		{Name: "a block's row bounds taken as linear whatever their ends", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "if br.steps01 && (dl == 0 || dl == last) && (dh == 0 || dh == last) {", New: "if br.steps01 && (dh == 0 || dh == last) {", Tests: dense},
		{Name: "a sink counted twice", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "f[r] = outScale / (d + u[r])", New: "f[r] = outScale / (d + 2*u[r])", Tests: dense},
		{Name: "a sink above the row's maximum counted twice", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "f[r] = outScale * u[r] / (d*u[r] + 1)", New: "f[r] = outScale * u[r] / (d*u[r] + 2)", Tests: dense},
		{Name: "a sink above the row's maximum taken as below it", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "} else if x <= 0 {", New: "} else if x <= 0 || true {", Tests: dense},
		{Name: "the sink in the LSE", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "f[r] = outScale / (d + u[r])", New: "l[r] = d + u[r]; f[r] = outScale / l[r]", Tests: dense},
		{Name: "the fused steps ignore the softcap", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "fused := br.softcap == 0", New: "fused := true", Tests: dense, Skip: noFused},
		{Name: "tanh without its sign", File: "backend/cpu/attend.go", Pkg: pkg,
			Old: "| math.Float32bits(x)&sign)", New: "| math.Float32bits(x)&sign&0)", Tests: dense},
		{Name: "split rows add the sink, and the merge again", File: "backend/cpu/paged.go", Pkg: pkg,
			Old: "\t} else if p.Sinks != nil {\n", New: "\t}\n\tif p.Sinks != nil {\n", Tests: paged},
		{Name: "a windowed paged block starts a panel late", File: "backend/cpu/paged.go", Pkg: pkg,
			Old: "base = lo / panel", New: "base = lo/panel + 1", Tests: paged},
	})
}
