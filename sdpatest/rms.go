package sdpatest

import (
	"fmt"
	"math"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
)

// RMSTolerance bounds the root-mean-square error of an output over the
// elements where both it and the oracle are finite (Stats.RMS; NaN and
// Inf are Tolerance's). It sits beside a worst-case tier where that tier is far
// above what a correct backend shows: a kernel that weighs a row's keys
// wrongly moves many outputs a little, which a bound on each element
// lets through and their mean square does not.
type RMSTolerance struct {
	RMS float64
	Why string
}

// RMSToleranceFor returns the RMS tier of a backend by name, beside
// ToleranceFor's worst case: FP8MMARMSTolerance for the backends held to
// FP8MMATolerance, whose worst case is far above their error; nil for the
// others, whose worst-case tiers are close to what they show.
func RMSToleranceFor(name string) func(*backend.Problem) RMSTolerance {
	if fp8MMABackend(name) {
		return FP8MMARMSTolerance
	}
	return nil
}

// Check returns an error naming the bound where st's RMS error (Compare's,
// over the elements where both sides are finite) is beyond rt, else nil.
func (rt RMSTolerance) Check(st Stats) error {
	if st.RMS > rt.RMS {
		return fmt.Errorf("RMS error %.3g over %d elements beyond %.3g (%s)", st.RMS, st.Finite, rt.RMS, rt.Why)
	}
	return nil
}

// E4M3RoundingVariance bounds the variance of the relative error of a
// positive value rounded to E4M3 (three mantissa bits, to nearest): the
// error lies within half a step, at most 2^-4 of the value, and taken as
// uniform there its variance is at most (2^-4)²/3.
const E4M3RoundingVariance = 1.0 / 768

// SpreadRMS is the root-mean-square over p's output of
// oracle.WeightSpread's variances: the RMS error that relative noise of
// unit variance on each weight causes, to first order, the rows
// normalized by the noisy weights' sum.
func SpreadRMS(p *backend.Problem) float64 {
	if p == nil {
		return 0
	}
	var sum float64
	n := 0
	for _, x := range oracle.WeightSpread(p).Var {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return math.Sqrt(sum / float64(n))
}

// The RMS tier of the FP8 tensor-core kernels (FP8MMARMSTolerance).
const (
	// rmsSpread is how far above its expected RMS the weights' noise may
	// show.
	rmsSpread = 3
	// rmsScoreShare is the share of FP8MMAScoreError's bound that a
	// score's error is taken to be, as relative noise on its weight: the
	// tensor cores' largest error measured 0.027-0.09 of it
	// (docs/ACCURACY.md).
	rmsScoreShare = 0.1
	// rmsTruncations is P·V's and the row sums' truncations, in units of
	// 2^-13·max|v| (the same measurement: about one term truncated a k
	// step of 32 keys, by less than 2^-13 of the step's largest
	// magnitude, at most the partial sum of a tile of four steps, so
	// about 4·2^-13·max|v| an output; twice that for the row sums, which
	// move an output by their error times |o| <= max|v|; and twice again
	// for a second truncation a step).
	rmsTruncations = 16
)

// FP8MMARMSTolerance is the RMS bound of the kernels with both GEMMs on
// FP8 tensor cores (stage 9, Hopper; stage 10, Ada), beside
// FP8MMATolerance. Each weight carries relative noise from its rounding
// to E4M3 (variance at most E4M3RoundingVariance, the top weight of each
// tile often exact) and from its score's error (a tenth of
// FP8MMAScoreError's bound plus a softcap's TanhApproxError, an absolute
// error of a score being a relative one of its weight): three times the
// RMS that noise causes (SpreadRMS), plus 16·2^-13·max|v| for P·V's and
// the row sums' truncations.
func FP8MMARMSTolerance(p *backend.Problem) RMSTolerance {
	if p == nil {
		return RMSTolerance{Why: "no problem"}
	}
	_, vmax := ScoreBound(p)
	e := rmsScoreShare * (FP8MMAScoreError(p) + TanhApproxError(p))
	spread := SpreadRMS(p) * math.Sqrt(E4M3RoundingVariance+e*e)
	trunc := rmsTruncations * vmax / (1 << 13)
	return RMSTolerance{RMS: rmsSpread*spread + trunc,
		Why: fmt.Sprintf("RMS: %d·%.3g (the weights' noise: E4M3 rounding, score errors %.3g) + %d·2^-13·max|v| %.3g (truncations)",
			rmsSpread, spread, e, rmsTruncations, trunc)}
}
