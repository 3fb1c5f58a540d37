package cpu_test

import (
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestShortFormCatchesMutants: the short form of a block (shortRows: the
// scores of every key a row sees first, one softmax a row, one P·V a
// group over its span), the keys scoresKeys4 computes (keyBlocks) and the
// strided AVX2 kernels it runs, each broken on purpose, fail their kernel
// tests or the conformance suite (FP8ATTN_MUTANTS=1; those of the AVX2
// kernels skipped on a CPU without them; the NEON kernels' strides are in
// TestNEONCatchesMutants).
func TestShortFormCatchesMutants(t *testing.T) {
	const pkg = "./backend/cpu"
	const short, kernels = "backend/cpu/short.go", "backend/cpu/kernels.go"
	const avx2, wrappers = "backend/cpu/kernels_avx2_amd64.s", "backend/cpu/kernels_amd64.go"
	dense, keys, strided := []string{"TestConformance"}, []string{"TestScoresKeys4", "TestKeyBlocks"}, []string{"TestPV4Strided"}
	noAVX2 := ""
	if !slices.Contains(cpu.ISAs(), "avx2") {
		noAVX2 = "no AVX2 kernel set on this CPU"
	}
	ms := []mutant.Mutant{
		{Name: "a row's weights before its first key left as scores", File: short,
			Old: "clear(p[:lo-glo])", New: "_ = p[:lo-glo]", Tests: dense},
		{Name: "a row's weights after its last key left as scores", File: short,
			Old: "clear(p[hi-glo:])", New: "_ = p[hi-glo:]", Tests: dense},
		{Name: "the columns padding a row's exponentials set to -1, not -Inf", File: short,
			Old: "pad[j] = negInf", New: "pad[j] = max(negInf, -1)", Tests: dense},
		{Name: "the span's values taken as finite", File: short,
			Old: "finite = kp.vFinite[kb]", New: "finite = kp.vFinite[kb] || true", Tests: dense},
		{Name: "a row's keys after those every row sees left out", File: short,
			Old: "if hi > p1 {", New: "if hi > p1 && false {", Tests: dense},
		{Name: "a group's scores from its first row's keys to the panel's end only", File: short,
			Old: "lo, hi := max(glo, j0), min(ghi, j0+panel)", New: "lo, hi := max(glo, j0), min(max(glo+1, j0+1), j0+panel)", Tests: dense},
		{Name: "keyBlocks past the panel's end", File: kernels,
			Old: "return min(k0, panel-16*blocks), blocks", New: "return k0, blocks", Tests: []string{"TestKeyBlocks"}},
		{Name: "keyBlocks from a multiple of 16", File: kernels,
			Old: "k0 = lo &^ 7", New: "k0 = lo &^ 15", Tests: []string{"TestKeyBlocks"}},
		{Name: "AVX2 scoresKeys4: the keys' blocks a vector late", File: wrappers,
			Old: "k0, blocks := keyBlocks(lo, hi)\n\tscores4x64AVX2", New: "k0, blocks := keyBlocks(lo, hi)\n\tk0 = min(k0+8, panel-16*blocks)\n\tscores4x64AVX2", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 scoresKeys4: the last block left out", File: wrappers,
			Old: "k0, blocks := keyBlocks(lo, hi)\n\tscores4x64AVX2", New: "k0, blocks := keyBlocks(lo, hi)\n\tblocks = max(1, blocks-1)\n\tscores4x64AVX2", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 scores: the rows a panel apart, not stride", File: avx2,
			Old: "\tMOVQ stride+48(FP), R14\n\tSHLQ $2, R14\n\ns4avx2_block:", New: "\tMOVQ $64, R14\n\tSHLQ $2, R14\n\ns4avx2_block:", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 pv4: the weights' rows a panel apart, not stride", File: avx2,
			Old: "\tMOVQ stride+48(FP), R14\n\tSHLQ $2, R14\n\tLEAQ (R14)(R14*2), R15", New: "\tMOVQ $64, R14\n\tSHLQ $2, R14\n\tLEAQ (R14)(R14*2), R15", Tests: strided, Skip: noAVX2},
	}
	for i := range ms {
		ms[i].Pkg = pkg
	}
	mutant.Run(t, ms)
}
