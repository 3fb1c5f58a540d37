// Package fp8mma bounds the error of a dot product of E4M3 codes computed by
// FP8 tensor cores, so that the conformance tiers of the kernels that use
// them follow from the arithmetic.
//
// Hopper's FP8 tensor cores (wgmma with e4m3 operands and a float32
// accumulator, QGMMA in SASS) form every product exactly, but add each k
// step's 32 products into the accumulator with only about 14 significant
// bits (DeepSeek-V3's technical report, section 3.3.2, on the H800),
// truncating toward zero. On the H200 the exact procedure fits no simple
// model (docs/ACCURACY.md: aligning a step's terms to the largest among them
// and truncating to 14 bits matched 64% of 12,288 scores; none of several
// hundred variants fitted six); every score measured there lies within
// ErrorBound (backend/cuda's TestWGMMAScoreError).
package fp8mma

import (
	"math"

	"github.com/fp8attn/fp8attn/fp8"
)

// StepTruncations is the number of truncations ErrorBound allows in each k
// step of 32 products: one for each product, one for the accumulator
// coming in and one for the result going out.
const StepTruncations = 34

// ErrorBound bounds |computed - exact| for the dot product of the codes q
// and k (in steps of 32 from index 0) on Hopper's FP8 tensor cores, in
// units of the codes' values: the sum over the steps of StepBound(T), T =
// max(|incoming sum|, max|product|, |outgoing sum|) taken from the exact
// partial sums. NaN in the codes, or q and k of different lengths, give
// NaN. A worst case: on random inputs the products' truncations mostly
// cancel (TestWGMMAScoreError logs by how much).
func ErrorBound(q, k []fp8.E4M3) float64 {
	if len(q) != len(k) {
		return math.NaN()
	}
	var bound, acc float64
	for i0 := 0; i0 < len(q); i0 += 32 {
		t := math.Abs(acc)
		for i := i0; i < min(i0+32, len(q)); i++ {
			x := float64(q[i].Float32()) * float64(k[i].Float32()) // exact: 4+4 significant bits
			acc += x                                               // exact: at most 2^11 such products fit float64
			t = max(t, math.Abs(x))
		}
		bound += StepBound(max(t, math.Abs(acc)))
	}
	return bound
}

// StepBound bounds what one k step loses when the largest magnitude in
// play is t: StepTruncations terms, each by less than 2^-13 of t, with t
// raised by 2^-4 for the errors the accumulator carries (under 34·8·2^-13
// of it for up to 256 products).
func StepBound(t float64) float64 {
	return StepTruncations * t * (1 + 1.0/16) / (1 << 13)
}

// ExactDot returns Σ q[i]·k[i] over the codes' values, exactly (at most 2^11
// products of 8 significant bits fit float64's 53); NaN if q and k differ
// in length.
func ExactDot(q, k []fp8.E4M3) float64 {
	if len(q) != len(k) {
		return math.NaN()
	}
	var s float64
	for i := range q {
		s += float64(q[i].Float32()) * float64(k[i].Float32())
	}
	return s
}
