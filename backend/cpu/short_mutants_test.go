package cpu_test

import (
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestShortFormCatchesMutants: the short form of a block (shortRows: the
// scores of every key a row sees first, one softmax a row, one P·V a
// group over its span), the keys scoresKeys4 computes (keyBlocks,
// keyVectors8) and the strided AVX2 kernels it runs, each broken on purpose, fail their kernel
// tests or the conformance suite (FP8ATTN_MUTANTS=1; those of the AVX2
// kernels skipped on a CPU without them; the NEON kernels' strides are in
// TestNEONCatchesMutants).
func TestShortFormCatchesMutants(t *testing.T) {
	const pkg = "./backend/cpu"
	const short, kernels = "backend/cpu/short.go", "backend/cpu/kernels.go"
	const avx2, wrappers = "backend/cpu/kernels_avx2_amd64.s", "backend/cpu/kernels_amd64.go"
	dense, keys, strided := []string{"TestConformance"}, []string{"TestScoresKeys4", "TestKeyBlocks", "TestKeyVectors8"}, []string{"TestPV4Strided"}
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
			Old: "k0 = lo &^ 7\n\tblocks", New: "k0 = lo &^ 15\n\tblocks", Tests: []string{"TestKeyBlocks"}},
		{Name: "keyVectors8: one vector for keys inside one", File: kernels,
			Old: "return min(k0, panel-16), 2", New: "return min(k0, panel-8), 1", Tests: []string{"TestKeyVectors8"}},
		{Name: "keyVectors8 from a multiple of 16", File: kernels,
			Old: "k0 = lo &^ 7\n\tn = (hi - k0 + 7) / 8", New: "k0 = lo &^ 15\n\tn = (hi - k0 + 7) / 8", Tests: []string{"TestKeyVectors8"}},
		{Name: "AVX2 scoresKeys4: the keys' blocks a vector late", File: wrappers,
			Old: "k0, n := keyVectors8(lo, hi)\n", New: "k0, n := keyVectors8(lo, hi)\n\tk0 = min(k0+8, panel-8*n)\n", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 scoresKeys4: the last block of 16 left out", File: wrappers,
			Old: "\tif blocks > 0 {\n\t\tscores4x64AVX2(&s[k0], &q[0], &kt[k0], d, scale, blocks, stride)", New: "\tif blocks > 1 {\n\t\tscores4x64AVX2(&s[k0], &q[0], &kt[k0], d, scale, blocks-1, stride)", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 scoresKeys4: the block of 24 left out", File: wrappers,
			Old: "\t\tscores4x24AVX2(&s[k], &q[0], &kt[k], d, scale, stride)\n", New: "\t\t_ = k\n", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 scores of 24 keys: the last row's third vector stored in the first row", File: avx2,
			Old: "\tVMOVUPS Y11, 64(BX)\n", New: "\tVMOVUPS Y11, 64(DI)\n", Tests: keys, Skip: noAVX2},
		{Name: "AVX2 scores of 24 keys: the third key vector from the second's keys", File: avx2,
			Old: "\tVMOVUPS 64(DX), Y14\n", New: "\tVMOVUPS 32(DX), Y14\n", Tests: keys, Skip: noAVX2},
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
