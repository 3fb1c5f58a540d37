package main

import (
	"fmt"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// tiers is what a check holds an output to: the worst-case tier of the
// backend (sdpatest.ToleranceFor) and, where it has one, its RMS tier
// (sdpatest.RMSToleranceFor), which catches a kernel that moves many
// outputs a little where the worst case, far above its error, does not.
type tiers struct {
	worst sdpatest.Tolerance
	rms   *sdpatest.RMSTolerance
}

// tiersFor returns the tiers of the backend named name (c.tierName's in
// its place where set) for p.
func (c config) tiersFor(name string, p *backend.Problem) tiers {
	if c.tierName != "" {
		name = c.tierName
	}
	t := tiers{worst: sdpatest.ToleranceFor(name)(p)}
	if f := sdpatest.RMSToleranceFor(name); f != nil {
		rt := f(p)
		t.rms = &rt
	}
	return t
}

// judge compares out to the oracle's want under t, records the errors and
// the verdict in r (it passes only within both tiers), and returns the
// check's report: the verdict, the worst case's errors and tolerance, and
// the RMS tier's line where there is one.
func (t tiers) judge(r *Result, out []float32, want []float64) string {
	st := sdpatest.Compare(out, want, t.worst)
	r.MaxErr, r.MeanErr, r.FracBeyond, r.Pass, r.Tolerance = st.MaxErr, st.MeanErr, st.FracBeyond(), st.Beyond == 0, t.worst.Why
	rms := ""
	if t.rms != nil {
		r.RMSErr, r.RMSTolerance = st.RMS, t.rms.Why
		verdict := "within"
		if err := t.rms.Check(st); err != nil {
			r.Pass, verdict = false, "BEYOND"
		}
		rms = fmt.Sprintf("\n         rms_err %.3g %s %.3g (%s)", st.RMS, verdict, t.rms.RMS, t.rms.Why)
	}
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s  max_err %.3g  mean_err %.3g  beyond tolerance %.2f%%  (tolerance: %s)%s",
		verdict, r.MaxErr, r.MeanErr, 100*r.FracBeyond, t.worst.Why, rms)
}
