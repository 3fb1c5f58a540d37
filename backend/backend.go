// Package backend defines the contract between the public sdpa API and the
// implementations that compute attention: one validated parameter block
// (Problem), the Backend interface, and a registry of backends by name.
//
// Tensors are dense row-major [B][H][S][D]. A backend receives a Problem that
// has passed Validate and writes Out (and LSE when it is not nil) and nothing
// else.
package backend

import (
	"errors"
	"fmt"
	"math"

	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/checked"
)

// Mask selects which keys each query sees.
type Mask int

const (
	// NoMask: every query sees every key.
	NoMask Mask = iota
	// CausalUpperLeft is PyTorch's is_causal=True: query i sees keys j <= i.
	CausalUpperLeft
	// CausalLowerRight is PyTorch's causal_lower_right and FlashAttention's
	// alignment: query i sees keys j <= i + Sk - Sq.
	CausalLowerRight
)

// String returns the mask's name as the runner's -mask flag spells it.
func (m Mask) String() string {
	switch m {
	case NoMask:
		return "none"
	case CausalUpperLeft:
		return "causal"
	case CausalLowerRight:
		return "causal-lr"
	}
	return fmt.Sprintf("Mask(%d)", int(m))
}

// ParseMask is String's inverse: "none", "causal" or "causal-lr".
func ParseMask(s string) (Mask, error) {
	for _, m := range []Mask{NoMask, CausalUpperLeft, CausalLowerRight} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("mask %q: want none, causal or causal-lr", s)
}

// Precision selects the arithmetic of the inputs.
type Precision int

const (
	// FP32: float32 inputs, float32 arithmetic.
	FP32 Precision = iota
	// FP8E4M3: E4M3 inputs with per-(batch, head) dequantization scales;
	// products accumulate in float32, descales are folded into the softmax
	// scale (Q, K) and the output (V).
	FP8E4M3
)

// String returns the precision's name as the runner's -precision flag spells it.
func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case FP8E4M3:
		return "fp8"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// Layout is the memory order of the four-dimensional tensors of a problem:
// Q, K, V and Out share it (LSE is always [B][Hq][Sq]).
type Layout int

const (
	// BHSD is [B][H][S][D]: each head's rows contiguous.
	BHSD Layout = iota
	// BSHD is [B][S][H][D]: each position's heads contiguous, the order a
	// projection's [S][H·D] output has.
	BSHD
)

// String returns the layout's name.
func (l Layout) String() string {
	switch l {
	case BHSD:
		return "bhsd"
	case BSHD:
		return "bshd"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// Strides returns the element strides between batches, heads and rows of a
// tensor with h heads, s rows and head dimension d stored in layout l.
func (l Layout) Strides(h, s, d int) (batch, head, row int) {
	if l == BSHD {
		return s * h * d, d, h * d
	}
	return h * s * d, s * d, d
}

// Offset returns the index of row (b, hd, i) (its first element) of a tensor
// with h heads, s rows and head dimension d stored in layout l.
func (l Layout) Offset(b, hd, i, h, s, d int) int {
	bs, hs, rs := l.Strides(h, s, d)
	return b*bs + hd*hs + i*rs
}

// HeadRuns calls fn(off, n) for each contiguous run of the elements of head
// (b, hd) of a tensor with h heads, s rows and head dimension d stored in
// layout l, in row order: one run of s·d in BHSD, s runs of d in BSHD.
func (l Layout) HeadRuns(b, hd, h, s, d int, fn func(off, n int)) {
	l.RowRuns(b, hd, h, s, d, 0, s, fn)
}

// RowRuns is HeadRuns over the head's rows [r0, r1) only (none where r0 >=
// r1): one run of (r1-r0)·d in BHSD, a run of d a row in BSHD.
func (l Layout) RowRuns(b, hd, h, s, d, r0, r1 int, fn func(off, n int)) {
	if r0 >= r1 {
		return
	}
	if l == BSHD {
		for i := r0; i < r1; i++ {
			fn(l.Offset(b, hd, i, h, s, d), d)
		}
		return
	}
	fn(l.Offset(b, hd, r0, h, s, d), (r1-r0)*d)
}

// Errors a backend or the registry returns; callers test them with errors.Is.
var (
	// ErrInvalid marks a Problem that no backend could run: bad shapes,
	// missing or mis-sized buffers, a non-finite scale.
	ErrInvalid = errors.New("invalid attention problem")
	// ErrUnsupported marks a valid Problem that a particular backend cannot
	// run (a head dimension, a precision).
	ErrUnsupported = errors.New("unsupported by backend")
	// ErrUnknownBackend marks a backend name that is not registered.
	ErrUnknownBackend = errors.New("unknown backend")
	// ErrOutOfMemory marks an allocation of device memory that the device
	// or the bound set on it (Memory.SetLimit) refused.
	ErrOutOfMemory = errors.New("out of device memory")
)

// Shape holds the dimensions of one attention call. Hq must be a multiple of
// Hkv: query head h reads key/value head h / (Hq/Hkv) (grouped-query and
// multi-query attention).
type Shape struct {
	B, Hq, Hkv, Sq, Sk, D int
}

// Group returns Hq/Hkv, the number of query heads sharing one KV head (0
// for a shape without KV heads, which Validate refuses).
func (s Shape) Group() int {
	if s.Hkv <= 0 {
		return 0
	}
	return s.Hq / s.Hkv
}

// VisibleKeys returns the number of keys query row i sees under mask m: keys
// 0 .. n-1. It may be 0 (a lower-right causal row with Sq > Sk sees none).
func (s Shape) VisibleKeys(m Mask, i int) int {
	var n int
	switch m {
	case CausalUpperLeft:
		n = i + 1
	case CausalLowerRight:
		n = i + 1 + s.Sk - s.Sq
	default:
		return s.Sk
	}
	return max(0, min(n, s.Sk))
}

// FLOPs returns the floating-point operations of the two matrix products
// (4·B·Hq·D·Σ visible keys), the usual way attention throughput is counted.
// It is computed in closed form, in float64, so that no shape makes it
// loop for long or overflow.
func (s Shape) FLOPs(m Mask) float64 {
	if s.Sq <= 0 || s.Sk <= 0 {
		return 0
	}
	sq, sk := float64(s.Sq), float64(s.Sk)
	var keys float64
	switch m {
	case CausalUpperLeft, CausalLowerRight:
		// Row i sees clamp(i+c, 0, Sk) keys: the sum over x = c .. c+Sq-1.
		c := 1.0
		if m == CausalLowerRight {
			c = 1 + sk - sq
		}
		lo, hi := c, c+sq-1
		if a, b := max(lo, 1), min(hi, sk-1); a <= b {
			keys += (a + b) * (b - a + 1) / 2
		}
		if n := hi - max(lo, sk) + 1; n > 0 {
			keys += n * sk
		}
	default:
		keys = sq * sk
	}
	return 4 * float64(s.B) * float64(s.Hq) * float64(s.D) * keys
}

// Problem is the parameter block every backend receives: validated once by
// Validate, then read, never changed, by the backend, which writes Out and,
// when it is not nil, LSE.
type Problem struct {
	Shape
	// Scale multiplies Q·Kᵀ before the softmax (already resolved: never 0
	// meaning "default" here).
	Scale     float32
	Mask      Mask
	Precision Precision
	// Layout is the memory order of Q, K, V and Out (zero: BHSD).
	Layout Layout
	// Variants: sliding window, softcap, sinks (zero: none).
	Variants

	// FP32 inputs: Q is [B][Hq][Sq][D], K and V are [B][Hkv][Sk][D], in
	// memory order Layout.
	Q, K, V []float32
	// FP8E4M3 inputs, same layouts, with dequantization scales per
	// (batch, head): value ≈ code.Float32() * scale.
	Q8, K8, V8             []fp8.E4M3
	QScale, KScale, VScale []float32
	// QuantizeOnRead says that an FP8E4M3 problem carries its inputs in
	// float32, in Q, K and V, with their scales, and that the backend
	// quantizes each element as it reads it: x becomes the value of
	// fp8.ToE4M3(x/scale, fp8.NoSat) (fp8.RoundE4M3), as if the codes of
	// fp8.QuantizeE4M3's encode had been passed in Q8, K8 and V8 (unused
	// here). Only a backend that implements OnReadQuantizer, answering
	// true for the problem, is given one; the result must be what the codes
	// give.
	QuantizeOnRead bool
	// ScalesOnRead, with QuantizeOnRead, leaves the dequantization scales
	// to the backend as well: QScale, KScale and VScale are nil, and the
	// backend computes each (batch, head)'s as fp8.QuantizeE4M3 does
	// (fp8.ScaleForAmax of the head's amax) before it quantizes, so that
	// the result is what the codes and scales of fp8.QuantizeE4M3 give; a
	// score factor beyond MaxScoreFactor, which Validate cannot see here,
	// is the backend's ErrInvalid error. Only a backend that implements
	// OnReadScaler, answering true for the problem, is given one.
	ScalesOnRead bool

	// Out is [B][Hq][Sq][D] in Layout. LSE, if not nil, is [B][Hq][Sq]: the natural
	// log-sum-exp of the scaled (softcapped), masked scores over the keys
	// (a sink left out; -Inf for a row with no visible key).
	Out []float32
	LSE []float32
}

// Validate checks the problem's shape and buffers once, so that backends can
// index without checks of their own. Every size product is checked for
// overflow before it is used. Errors wrap ErrInvalid.
func (p *Problem) Validate() error {
	if p == nil {
		return fmt.Errorf("%w: a nil problem", ErrInvalid)
	}
	s := p.Shape
	if s.B <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.Sq <= 0 || s.Sk <= 0 || s.D <= 0 {
		return fmt.Errorf("%w: sizes must be positive, got B=%d Hq=%d Hkv=%d Sq=%d Sk=%d D=%d",
			ErrInvalid, s.B, s.Hq, s.Hkv, s.Sq, s.Sk, s.D)
	}
	if s.Hq%s.Hkv != 0 {
		return fmt.Errorf("%w: query heads (%d) must be a multiple of key/value heads (%d)", ErrInvalid, s.Hq, s.Hkv)
	}
	if math.IsNaN(float64(p.Scale)) || math.IsInf(float64(p.Scale), 0) {
		return fmt.Errorf("%w: scale is %v", ErrInvalid, p.Scale)
	}
	if p.Mask < NoMask || p.Mask > CausalLowerRight {
		return fmt.Errorf("%w: unknown mask %d", ErrInvalid, int(p.Mask))
	}
	if p.Layout != BHSD && p.Layout != BSHD {
		return fmt.Errorf("%w: unknown layout %d", ErrInvalid, int(p.Layout))
	}
	if err := p.Variants.Check(s.Hq, p.Mask); err != nil {
		return err
	}
	nq, ok1 := checked.Mul(s.B, s.Hq, s.Sq, s.D)
	nkv, ok2 := checked.Mul(s.B, s.Hkv, s.Sk, s.D)
	if !ok1 || !ok2 {
		return fmt.Errorf("%w: shape B=%d Hq=%d Hkv=%d Sq=%d Sk=%d D=%d overflows int", ErrInvalid, s.B, s.Hq, s.Hkv, s.Sq, s.Sk, s.D)
	}
	var arr [8]sizeCheck // no allocation: Validate runs on every call
	checks := append(arr[:0], sizeCheck{"Out", len(p.Out), nq})
	if p.LSE != nil {
		checks = append(checks, sizeCheck{"LSE", len(p.LSE), s.B * s.Hq * s.Sq})
	}
	switch p.Precision {
	case FP32:
		checks = append(checks, sizeCheck{"Q", len(p.Q), nq}, sizeCheck{"K", len(p.K), nkv}, sizeCheck{"V", len(p.V), nkv})
	case FP8E4M3:
		if p.QuantizeOnRead {
			checks = append(checks, sizeCheck{"Q", len(p.Q), nq}, sizeCheck{"K", len(p.K), nkv}, sizeCheck{"V", len(p.V), nkv})
		} else {
			checks = append(checks, sizeCheck{"Q8", len(p.Q8), nq}, sizeCheck{"K8", len(p.K8), nkv}, sizeCheck{"V8", len(p.V8), nkv})
		}
		for i, sc := range [][]float32{p.QScale, p.KScale, p.VScale} {
			want := s.B * s.Hkv
			if i == 0 {
				want = s.B * s.Hq
			}
			if p.ScalesOnRead {
				want = 0
			}
			if len(sc) != want {
				return fmt.Errorf("%w: %s has %d elements, shape needs %d", ErrInvalid, [...]string{"QScale", "KScale", "VScale"}[i], len(sc), want)
			}
		}
		if p.ScalesOnRead && !p.QuantizeOnRead {
			return fmt.Errorf("%w: ScalesOnRead without QuantizeOnRead (codes come with their scales)", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: unknown precision %d", ErrInvalid, int(p.Precision))
	}
	for _, c := range checks {
		if c.got != c.want {
			return fmt.Errorf("%w: %s has %d elements, shape needs %d", ErrInvalid, c.name, c.got, c.want)
		}
	}
	if p.Precision == FP8E4M3 && !p.ScalesOnRead {
		return p.checkScales()
	}
	return nil
}

// MaxScoreFactor bounds ScoreFactor: with it, the largest score an E4M3
// problem can produce, |factor|·448²·D, times log2(e) (the kernels work in
// the log2 domain), stays a finite float32. A larger factor is rejected by
// Validate rather than turned into ±Inf scores, and so NaN outputs, where
// the exact attention is finite.
func MaxScoreFactor(d int) float64 {
	return math.MaxFloat32 / (math.Log2E * fp8.MaxE4M3 * fp8.MaxE4M3 * float64(d))
}

// ScoreFactor returns the factor that turns the E4M3 code dot product of
// query row q·k into a score for query head bh = b·Hq+h: Scale ·
// QScale[bh] · KScale[b·Hkv + h/Group()], multiplied in float64, so that no
// intermediate product overflows or underflows before the final rounding.
// Every backend computes its score scale with it (the GPU kernels do the
// same product in double precision). It is NaN for a problem without that
// head (nil, or whose scales Validate would refuse), which no bound
// passes.
func (p *Problem) ScoreFactor(bh int) float64 {
	if p == nil || p.Hq <= 0 || p.Group() <= 0 || bh < 0 || bh >= len(p.QScale) {
		return math.NaN()
	}
	b, h := bh/p.Hq, bh%p.Hq
	kh := b*p.Hkv + h/p.Group()
	if kh >= len(p.KScale) {
		return math.NaN()
	}
	return float64(p.Scale) * float64(p.QScale[bh]) * float64(p.KScale[kh])
}

// checkScales checks the dequantization scales and that every head's score
// factor is within MaxScoreFactor.
func (p *Problem) checkScales() error {
	for i, sc := range [][]float32{p.QScale, p.KScale, p.VScale} {
		for _, v := range sc {
			if !(v > 0) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: %s dequantization scale %v is not positive and finite", ErrInvalid, [...]string{"Q", "K", "V"}[i], v)
			}
		}
	}
	limit := MaxScoreFactor(p.D)
	for bh := range p.QScale {
		if f := math.Abs(p.ScoreFactor(bh)); !(f <= limit) { // (NaN fails)
			b, h := bh/p.Hq, bh%p.Hq
			return fmt.Errorf("%w: head (%d, %d): scale %g × Q descale %g × K descale %g = %g can make scores overflow float32 (limit %g for D=%d)",
				ErrInvalid, b, h, p.Scale, p.QScale[bh], p.KScale[b*p.Hkv+h/p.Group()], f, limit, p.D)
		}
	}
	return nil
}

type sizeCheck struct {
	name      string
	got, want int
}

// OnReadQuantizer is implemented by a backend that can quantize float32
// inputs itself as it reads them (the cpu backend, which computes on the
// codes' values in float32; the cuda backend, which encodes them straight
// into the page-locked memory it uploads from): QuantizesOnRead reports
// whether it takes p (whose inputs are not yet set) with QuantizeOnRead set.
// This spares a caller that quantizes float32 inputs for it writing codes
// that it would only read once more.
type OnReadQuantizer interface {
	QuantizesOnRead(p *Problem) bool
}

// OnReadScaler is implemented by a backend that can also compute the
// dequantization scales of float32 inputs it quantizes (the cuda backend,
// which computes them beside the encoding of the codes it uploads):
// ScalesOnRead reports whether it takes p (whose inputs are not yet set)
// with QuantizeOnRead and ScalesOnRead set. This spares a caller a pass
// over the inputs for their scales.
type OnReadScaler interface {
	ScalesOnRead(p *Problem) bool
}

// Availability is implemented by a backend that is registered in every
// build but may be unusable in this one (the cuda backends without -tags
// cuda): Available returns nil, or why it cannot run anything.
type Availability interface {
	Available() error
}

// Backend computes attention for validated problems.
type Backend interface {
	// Name is the name the backend is registered and selected by.
	Name() string
	// Supports returns nil if the backend can run p, or an error wrapping
	// ErrUnsupported that says why not.
	Supports(p *Problem) error
	// Attention computes p.Out (and p.LSE if not nil). p has passed
	// Validate and Supports. On error the contents of Out are unspecified;
	// the sdpa package never hands such a buffer to its caller.
	Attention(p *Problem) error
}
