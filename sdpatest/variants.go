package sdpatest

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/backend"
)

// testNaNVariants restates the NaN rule (package doc) with a sliding
// window, a softcap and sinks: NaN in one Q element of head 0, in one K
// element of KV head 0 and in one V element of KV head 1, under each causal
// alignment with Sq > Sk, so that some rows' windows hold no key. A row is
// NaN where it sees the NaN key (inside its window), and only there; a
// column where the row sees the NaN value's key (a backend with LoadedKeys
// may also spread it to rows that load the key without seeing it); a row
// whose window holds no key is zeros with LSE -Inf, its sink
// notwithstanding. V's NaN key is drawn at random, and then, in a second
// run, put where one row sees it and the next three rows do not, though
// all four see every key after it up to key 63 (the lower edge of the
// window of row 64 under the upper-left alignment, of row 96 under the
// lower-right): a backend that works rows in groups of four over panels
// of 64 keys and takes one P·V over such a group's keys would spread it.
// All of it twice: with a window of nanWindow keys, and of 64, where such a
// group sees the first panel from its edge on and the second up to the
// same place (a backend that pairs the two panels in one step, with a P·V
// over each panel's keys, would spread it there).
func testNaNVariants(cfg Config, rng *rand.Rand) error {
	for _, w := range []int{nanWindow, 64} {
		for _, m := range []backend.Mask{backend.CausalUpperLeft, backend.CausalLowerRight} {
			for _, edge := range []bool{false, true} {
				if err := testNaNVariantsIn(cfg, rng, m, edge, w); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// testNaNVariantsIn is testNaNVariants' check under mask m and window w,
// with V's NaN key at the window's edge where edge is true.
func testNaNVariantsIn(cfg Config, rng *rand.Rand, m backend.Mask, edge bool, w int) error {
	s := backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 120, Sk: 90, D: 64}
	in := RandomInputs(rng, s, 1)
	in.Sinks = RandomSinks(rng, s)
	nan := float32(math.NaN())
	qRow, kRow, vRow, vCol := rng.IntN(s.Sq), 10+rng.IntN(80), 10+rng.IntN(80), rng.IntN(s.D)
	if edge {
		// Row r0, the first multiple of 4 at position 63 or past it, and
		// the three after it see every key from the lower edge of r0's
		// window to key 63; only r0 sees that edge's key.
		off := 0 // a row's position less its index
		if m == backend.CausalLowerRight {
			off = s.Sk - s.Sq
		}
		r0 := (63 - off + 3) / 4 * 4
		vRow = r0 + off - w + 1
	}
	in.Q[qRow*s.D+rng.IntN(s.D)] = nan
	in.K[kRow*s.D+rng.IntN(s.D)] = nan
	in.V[(s.Sk+vRow)*s.D+vCol] = nan
	p, skipped, err := cfg.run(Case{Shape: s, Mask: m, Window: w, Softcap: 10}, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	empty := 0
	for h := range s.Hq {
		for i := range s.Sq {
			lo, hi := p.KeyRange(i)
			sees := lo < hi
			in := func(j int) bool { return lo <= j && j < hi }
			rowNaN := h == 0 && i == qRow && sees || h < 2 && in(kRow)
			colNaN := h >= 2 && in(vRow)
			colMay := h >= 2 && sees && cfg.LoadedKeys != nil && cfg.loaded(s, m, i) > vRow
			if !sees {
				empty++
				if l := p.LSE[h*s.Sq+i]; !math.IsInf(float64(l), -1) {
					return fmt.Errorf("%v head %d row %d sees no key: LSE %g, want -Inf", m, h, i, l)
				}
			}
			for d := range s.D {
				got := p.Out[(h*s.Sq+i)*s.D+d]
				want := rowNaN || colNaN && d == vCol
				if isNaN := math.IsNaN(float64(got)); isNaN != want && !(d == vCol && colMay && !rowNaN) {
					return fmt.Errorf("%v window %d: head %d row %d (keys %d..%d) column %d: output %g, want NaN=%v (NaN at Q row %d, K key %d, V key %d column %d)",
						m, w, h, i, lo, hi-1, d, got, want, qRow, kRow, vRow, vCol)
				}
				if !sees && got != 0 {
					return fmt.Errorf("%v head %d row %d sees no key: output %g, want 0", m, h, i, got)
				}
			}
		}
	}
	if empty == 0 && w == nanWindow { // (under the upper-left alignment every row sees a key of the wider window)
		return fmt.Errorf("%v: no row with an empty window: the case tests nothing of them", m)
	}
	return nil
}

// nanWindow is testNaNVariants' sliding window.
const nanWindow = 20

// testSinkLSE: a sink changes nothing but each row's scale, by
// 1/(1 + e^(sink - LSE)) with LSE the row's log-sum-exp over its keys, and
// leaves the LSE as it is (package backend's Variants.Sinks: results over
// key splits merge by their LSEs, the sink added once).
func testSinkLSE(cfg Config, rng *rand.Rand) error {
	s := backend.Shape{B: 2, Hq: 4, Hkv: 2, Sq: 9, Sk: 50, D: 64}
	in := RandomInputs(rng, s, 1)
	c := Case{Shape: s, Mask: backend.CausalLowerRight}
	plain, skipped, err := cfg.run(c, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	in.Sinks = RandomSinks(rng, s)
	sunk, skipped, err := cfg.run(c, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	// The two runs share their scores, weights and P·V, so the sink's run
	// is the plain output times l/(l + e^sink), l the row's normalizer
	// (e^m times the weights' sum), which the LSE gives within the
	// rounding of the weights (P in E4M3 for P·V: 2^-4 relative at worst)
	// and the LSE's own error (ltol); with x = e^(sink - LSE), f = 1/(1 +
	// x) then carries a relative error of at most (2^-4 + e)·x/(1 + x),
	// e the LSE's error: a sink counted twice (f = 1/(1 + 2x)) is off by
	// x/(1 + 2x), far beyond it where x is not small.
	ltol := cfg.lseTol(sunk)
	for bh := range s.B * s.Hq {
		for i := range s.Sq {
			r := bh*s.Sq + i
			lse := float64(plain.LSE[r])
			x := math.Exp(float64(in.Sinks[bh%s.Hq]) - lse)
			f := 1 / (1 + x)
			rel := (1.0/16+ltol.Atol+ltol.Rtol*math.Abs(lse))*x/(1+x) + 1e-6
			for d := range s.D {
				o, got := float64(plain.Out[r*s.D+d]), float64(sunk.Out[r*s.D+d])
				if !(math.Abs(got-o*f) <= rel*math.Abs(o)+1e-30) {
					return fmt.Errorf("sinks: row %d column %d is %g, not the plain output %g times 1/(1+e^(sink-LSE)) = %g (relative bound %.3g)",
						r, d, got, o, f, rel)
				}
			}
		}
	}
	if st := Compare(sunk.LSE, plain.LSE, ltol); st.Beyond > 0 {
		return fmt.Errorf("sinks changed %d LSEs (first at %d: %g, without sinks %g): the LSE is over the keys only",
			st.Beyond, st.FirstBad, sunk.LSE[st.FirstBad], plain.LSE[st.FirstBad])
	}
	return nil
}

func maxAbs(x []float32) float32 {
	var m float32
	for _, e := range x {
		m = max(m, float32(math.Abs(float64(e))))
	}
	return m
}
