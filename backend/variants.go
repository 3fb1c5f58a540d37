package backend

import (
	"fmt"
	"math"
	"strings"
)

// Variants are the attention variants a problem may ask for on top of the
// plain masked softmax. The zero value asks for none. Problem and
// PagedProblem embed it; Validate checks it.
type Variants struct {
	// SlidingWindow, when positive, limits a query at position p (its
	// position in the key sequence under the causal mask: i for
	// CausalUpperLeft, i + Sk - Sq for CausalLowerRight) to the keys j with
	// p - SlidingWindow < j <= p. It requires a causal mask.
	SlidingWindow int
	// Softcap, when positive, replaces each score s (scale·q·k, after the
	// FP8 descales) by Softcap·tanh(s/Softcap) before the mask and the
	// softmax.
	Softcap float32
	// Sinks, when not nil, holds one logit per query head (len Hq): e^sink
	// joins the softmax denominator of every row of that head and carries no
	// value, out_i = Σ_j e^{s_ij}·v_j / (Σ_j e^{s_ij} + e^{sink}). The LSE
	// stays over the keys only (log Σ_j e^{s_ij}), so partial results over
	// key splits merge by their LSEs with the sink added once.
	Sinks []float32
}

// Any reports whether v asks for any variant.
func (v *Variants) Any() bool {
	return v != nil && (v.SlidingWindow != 0 || v.Softcap != 0 || v.Sinks != nil)
}

// Names lists the variants v asks for ("window", "softcap", "sinks"),
// joined by commas ("" for none).
func (v *Variants) Names() string {
	if v == nil {
		return ""
	}
	var n []string
	if v.SlidingWindow != 0 {
		n = append(n, "window")
	}
	if v.Softcap != 0 {
		n = append(n, "softcap")
	}
	if v.Sinks != nil {
		n = append(n, "sinks")
	}
	return strings.Join(n, ",")
}

// Unsupported returns nil for a problem without variants, and otherwise an
// error wrapping ErrUnsupported that says backend name has no kernel for
// them: what a backend's Supports returns for variants it lacks.
func (v *Variants) Unsupported(name string) error {
	if !v.Any() {
		return nil
	}
	return fmt.Errorf("%w: %s has no kernel for the attention variants %s", ErrUnsupported, name, v.Names())
}

// Check checks v for a problem of hq query heads under mask m. Errors wrap
// ErrInvalid.
func (v *Variants) Check(hq int, m Mask) error {
	if v == nil {
		return nil
	}
	if v.SlidingWindow < 0 {
		return fmt.Errorf("%w: sliding window %d is negative", ErrInvalid, v.SlidingWindow)
	}
	if v.SlidingWindow > 0 && m != CausalUpperLeft && m != CausalLowerRight {
		return fmt.Errorf("%w: a sliding window needs a causal mask, not %v", ErrInvalid, m)
	}
	if c := float64(v.Softcap); !(c >= 0) || math.IsInf(c, 0) {
		return fmt.Errorf("%w: softcap %v is not a finite non-negative number", ErrInvalid, v.Softcap)
	}
	if v.Sinks != nil {
		if len(v.Sinks) != hq {
			return fmt.Errorf("%w: %d sinks for %d query heads", ErrInvalid, len(v.Sinks), hq)
		}
		for h, s := range v.Sinks {
			if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				return fmt.Errorf("%w: sink of head %d is %v", ErrInvalid, h, s)
			}
		}
	}
	return nil
}

// window narrows the keys 0..n-1 a query at position pos sees (under a
// causal mask, n = pos+1 clamped to the keys) to v's sliding window: keys
// lo..hi-1, empty (lo >= hi) when the window holds none.
func (v *Variants) window(pos, n int) (lo, hi int) {
	if v == nil || v.SlidingWindow <= 0 {
		return 0, n
	}
	lo = max(0, pos-v.SlidingWindow+1)
	return min(lo, n), n
}

// Sink returns query head h's sink logit, or -Inf for a problem without
// sinks (e^-Inf = 0 joins the denominator).
func (v *Variants) Sink(h int) float64 {
	if v == nil || v.Sinks == nil || h < 0 || h >= len(v.Sinks) {
		return math.Inf(-1)
	}
	return float64(v.Sinks[h])
}

// KeyRange returns the keys lo..hi-1 that query row i sees under p's mask
// and sliding window (lo >= hi: none).
func (p *Problem) KeyRange(i int) (lo, hi int) {
	if p == nil {
		return 0, 0
	}
	n := p.VisibleKeys(p.Mask, i)
	pos := i
	if p.Mask == CausalLowerRight {
		pos = i + p.Sk - p.Sq
	}
	return p.window(pos, n)
}

// KeyRange returns the cached keys lo..hi-1 that query i of sequence b sees
// under p's mask and sliding window (lo >= hi: none; 0, 0 for a sequence
// the problem does not have).
func (p *PagedProblem) KeyRange(b, i int) (lo, hi int) {
	if p == nil || b < 0 || b >= len(p.SeqLens) {
		return 0, 0
	}
	n := p.VisibleKeys(b, i)
	return p.window(int(p.SeqLens[b])-p.Queries(b)+i, n)
}
