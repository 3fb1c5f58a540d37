package sdpa

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/backend"
	_ "github.com/fp8attn/fp8attn/backend/cpu"  // registers "cpu"
	_ "github.com/fp8attn/fp8attn/backend/cuda" // registers "cuda" (-tags cuda; otherwise an explanatory error)
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/par"
	_ "github.com/fp8attn/fp8attn/oracle" // registers "reference"
)

// Mask selects which keys each query sees.
type Mask = backend.Mask

// Masks.
const (
	// NoMask: every query sees every key.
	NoMask = backend.NoMask
	// CausalUpperLeft is PyTorch's is_causal=True: query i sees keys j <= i.
	CausalUpperLeft = backend.CausalUpperLeft
	// CausalLowerRight is PyTorch's causal_lower_right (FlashAttention's
	// alignment): query i sees keys j <= i + Sk - Sq.
	CausalLowerRight = backend.CausalLowerRight
)

// Precision selects the arithmetic.
type Precision = backend.Precision

// Precisions.
const (
	// FP32 computes in float32 on the float32 inputs.
	FP32 = backend.FP32
	// FP8E4M3 quantizes Q, K and V to E4M3 with one amax scale per
	// (batch, head) and computes as the GPU kernels do: E4M3 products
	// accumulated in float32, descales folded into the softmax scale.
	FP8E4M3 = backend.FP8E4M3
)

// Errors, for errors.Is.
var (
	ErrInvalid        = backend.ErrInvalid
	ErrUnsupported    = backend.ErrUnsupported
	ErrUnknownBackend = backend.ErrUnknownBackend
	// ErrOutOfMemory: a device refused an allocation (Device.SetMemoryLimit).
	ErrOutOfMemory = backend.ErrOutOfMemory
)

// Layout is the memory order of a tensor.
type Layout = backend.Layout

// Layouts.
const (
	// BHSD is [B][H][S][D]: each head's rows contiguous.
	BHSD = backend.BHSD
	// BSHD is [B][S][H][D]: each position's heads contiguous.
	BSHD = backend.BSHD
)

// Tensor is a dense float32 tensor of shape [B][H][S][D], stored in Layout
// order.
type Tensor struct {
	Data       []float32
	B, H, S, D int
	// Layout is the memory order of Data: BHSD ([B][H][S][D], the zero
	// value) or BSHD ([B][S][H][D], a projection's output as it is). Q, K,
	// V and an AttentionInto output must share it; results come in it.
	Layout Layout
}

// row returns row (b, h, i) of t.
func (t *Tensor) row(b, h, i int) []float32 {
	o := t.Layout.Offset(b, h, i, t.H, t.S, t.D)
	return t.Data[o : o+t.D]
}

// NewTensor wraps data (not copied) as a [b][h][s][d] tensor, checking that
// the sizes are positive, that their product fits in an int, and that it
// equals len(data).
func NewTensor(data []float32, b, h, s, d int) (*Tensor, error) {
	t := &Tensor{Data: data, B: b, H: h, S: s, D: d}
	if err := t.check("tensor"); err != nil {
		return nil, err
	}
	return t, nil
}

// checkDims checks a shape against an element count without overflowing.
func checkDims(what string, n, b, h, s, d int) error {
	if b <= 0 || h <= 0 || s <= 0 || d <= 0 {
		return fmt.Errorf("%w: %s: sizes must be positive, got [%d][%d][%d][%d]", ErrInvalid, what, b, h, s, d)
	}
	size, ok := checked.Mul(b, h, s, d)
	if !ok {
		return fmt.Errorf("%w: %s: shape [%d][%d][%d][%d] overflows int", ErrInvalid, what, b, h, s, d)
	}
	if size != n {
		return fmt.Errorf("%w: %s: %d elements do not match shape [%d][%d][%d][%d]", ErrInvalid, what, n, b, h, s, d)
	}
	return nil
}

func (t *Tensor) check(what string) error {
	if t == nil {
		return fmt.Errorf("%w: %s is nil", ErrInvalid, what)
	}
	if t.Layout != BHSD && t.Layout != BSHD {
		return fmt.Errorf("%w: %s: unknown layout %d", ErrInvalid, what, int(t.Layout))
	}
	return checkDims(what, len(t.Data), t.B, t.H, t.S, t.D)
}

// QuantizedTensor is an E4M3 tensor with one dequantization scale per
// (batch, head): element (b, h, s, d) ≈ Data[...].Float32() · Scales[b·H+h].
// It is how already-quantized inputs (an FP8 KV cache) are passed without
// re-quantizing them.
type QuantizedTensor struct {
	Data       []fp8.E4M3
	Scales     []float32
	B, H, S, D int
	Layout     Layout // as Tensor.Layout
}

// NewQuantizedTensor wraps data and scales (not copied). scales holds one
// positive, finite scale per (batch, head), or a single scale for the whole
// tensor, which is expanded (into a new slice) once the shape has been
// checked.
func NewQuantizedTensor(data []fp8.E4M3, scales []float32, b, h, s, d int) (*QuantizedTensor, error) {
	const what = "quantized tensor"
	if err := checkDims(what, len(data), b, h, s, d); err != nil {
		return nil, err
	}
	if len(scales) == 1 && b*h > 1 { // b*h <= b*h*s*d, which fits
		one := scales[0]
		scales = make([]float32, b*h)
		for i := range scales {
			scales[i] = one
		}
	}
	t := &QuantizedTensor{Data: data, Scales: scales, B: b, H: h, S: s, D: d}
	if err := t.check(what); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *QuantizedTensor) check(what string) error {
	if t == nil {
		return fmt.Errorf("%w: %s is nil", ErrInvalid, what)
	}
	if t.Layout != BHSD && t.Layout != BSHD {
		return fmt.Errorf("%w: %s: unknown layout %d", ErrInvalid, what, int(t.Layout))
	}
	if err := checkDims(what, len(t.Data), t.B, t.H, t.S, t.D); err != nil {
		return err
	}
	if len(t.Scales) != t.B*t.H {
		return fmt.Errorf("%w: %s: %d scales, want one per (batch, head) = %d", ErrInvalid, what, len(t.Scales), t.B*t.H)
	}
	for _, s := range t.Scales {
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("%w: %s: scale %v is not positive and finite", ErrInvalid, what, s)
		}
	}
	return nil
}

// Quantize returns t quantized to E4M3 with one amax scale per (batch, head)
// (scale = amax/448). NaN and ±Inf elements quantize to NaN.
func Quantize(t *Tensor) (*QuantizedTensor, error) {
	if err := t.check("tensor"); err != nil {
		return nil, err
	}
	q := &QuantizedTensor{Data: make([]fp8.E4M3, len(t.Data)), Scales: make([]float32, t.B*t.H), B: t.B, H: t.H, S: t.S, D: t.D, Layout: t.Layout}
	quantizeInto(q, t)
	return q, nil
}

// quantizeInto quantizes a checked t into q, of its shape and layout.
func quantizeInto(q *QuantizedTensor, t *Tensor) {
	for bh := range q.Scales {
		quantGroup{codes: q.Data, scale: q.Scales[bh : bh+1], t: t, bh: bh}.run()
	}
}

// Dequantize returns the float32 tensor t represents, or an error wrapping
// ErrInvalid if t is inconsistent (nil, data or scales not matching the
// shape, a scale that is not positive and finite).
func (t *QuantizedTensor) Dequantize() (*Tensor, error) {
	if err := t.check("quantized tensor"); err != nil {
		return nil, err
	}
	out := &Tensor{Data: make([]float32, len(t.Data)), B: t.B, H: t.H, S: t.S, D: t.D, Layout: t.Layout}
	return out, t.dequantizeInto(out)
}

// dequantizeInto decodes a checked t into out, a tensor of its shape and
// layout.
func (t *QuantizedTensor) dequantizeInto(out *Tensor) error {
	n := t.S * t.D
	for g, s := range t.Scales {
		if t.Layout == BHSD {
			fp8.DecodeE4M3(out.Data[g*n:(g+1)*n], t.Data[g*n:(g+1)*n], s)
			continue
		}
		for i := range t.S {
			o := t.Layout.Offset(g/t.H, g%t.H, i, t.H, t.S, t.D)
			fp8.DecodeE4M3(out.Data[o:o+t.D], t.Data[o:o+t.D], s)
		}
	}
	return nil
}

// Options configures a call. The zero value (and a nil *Options) means:
// scale 1/sqrt(D), no mask, FP32, the best available backend.
type Options struct {
	// Scale multiplies Q·Kᵀ; 0 means 1/sqrt(D). NaN and ±Inf are errors.
	Scale float32
	Mask  Mask
	// Precision is FP32 or FP8E4M3. AttentionQuantized implies FP8E4M3.
	Precision Precision
	// Backend is "" (the best registered backend that supports the call),
	// "cpu", "cuda" (with -tags cuda), "reference" (float64, slow), or a
	// backend-specific name such as a GPU architecture's kernel ("cuda/sm90").
	Backend string

	// SmoothK subtracts, before quantization, each (batch, KV head)'s mean
	// key from its keys (K smoothing). Every query's scores shift by one
	// constant, which the softmax cancels, so the output is unchanged in
	// exact arithmetic, and the returned LSE is corrected for the shift.
	// With FP8E4M3 it removes what a channel offset costs quantization:
	// keys whose outlier channels carry a common offset lose far less
	// (docs/ACCURACY.md). Attention and AttentionLSE only.
	SmoothK bool
	// Hadamard multiplies Q and K, before quantization, by a random-sign
	// block Walsh-Hadamard matrix (blocks of HadamardBlock(D)), one per
	// (batch, KV head), fixed across calls (incoherent processing). It is
	// orthogonal, so Q·Kᵀ is unchanged in exact arithmetic; it spreads
	// outlier channels over all channels before quantization.
	// Attention and AttentionLSE only.
	Hadamard bool
	// OutlierChannels, when positive, carries that many channels of each
	// (batch, KV head) in two E4M3 terms instead of one: the channels c
	// with the largest max|K[:,c]|·max|Q[:,c]| (Q over the heads that read
	// the KV head), after SmoothK and Hadamard. Each splits into a value
	// rounded to E4M3 and its remainder, spread over c and three appended
	// channels so that Q·Kᵀ is unchanged in exact arithmetic (LLM.int8()'s
	// outlier decomposition, in FP8). The backend then computes with head
	// dim D+3·OutlierChannels rounded up to a multiple of 16 (V padded
	// with zeros), so the call costs about that much more. With FP8E4M3 it
	// removes most of what keys with a few large channels cost
	// quantization (docs/ACCURACY.md). At most D. Attention, AttentionLSE,
	// AttentionInto and the varlen calls on host tensors; a backend
	// without kernels for the widened head dim reports ErrUnsupported.
	OutlierChannels int

	// SlidingWindow, when positive, limits each query to the last
	// SlidingWindow keys up to its position (local attention, as Mistral,
	// Gemma and gpt-oss use): a query at position p (i for
	// CausalUpperLeft, i + Sk - Sq for CausalLowerRight) sees the keys j
	// with p - SlidingWindow < j <= p. It needs a causal mask (NoMask with
	// a window is ErrInvalid); negative is ErrInvalid. A row whose window
	// holds no key gets zeros and LSE -Inf.
	SlidingWindow int
	// Softcap, when positive, caps the scores: each s = scale·q·k becomes
	// Softcap·tanh(s/Softcap) before the mask and the softmax (Gemma 2's
	// attn_logit_softcapping). Negative, NaN or ±Inf is ErrInvalid.
	Softcap float32
	// Sinks, when not nil, holds one learned sink logit per query head
	// (len q.H; NaN or ±Inf is ErrInvalid), as gpt-oss has: e^sink_h joins
	// the softmax denominator of every row of head h and carries no value,
	// out_i = Σ_j e^(s_ij)·v_j / (Σ_j e^(s_ij) + e^(sink_h)). The returned
	// LSE is over the keys only, log Σ_j e^(s_ij): outputs computed over
	// parts of the keys without the sink merge by their LSEs exactly, and
	// the sink is then added once (out·1/(1 + e^(sink_h - LSE))). SmoothK
	// shifts each row's scores, which neither a softcap nor a sink
	// tolerates: SmoothK with either is ErrInvalid.
	Sinks []float32
}

// variants returns the attention variants o asks for.
func (o *Options) variants() backend.Variants {
	return backend.Variants{SlidingWindow: o.SlidingWindow, Softcap: o.Softcap, Sinks: o.Sinks}
}

// transformsInputs reports whether o asks for a transform of the float32
// inputs before quantization (SmoothK, Hadamard, OutlierChannels), which
// calls on inputs already quantized, and kv caches, cannot make.
func (o *Options) transformsInputs() bool {
	return o != nil && (o.SmoothK || o.Hadamard || o.OutlierChannels != 0)
}

// Backends lists the registered backend names, best first.
func Backends() []string { return backend.Names() }

// Attention returns softmax(scale·Q·Kᵀ + mask)·V as a [B][q.H][q.S][D]
// tensor. opts may be nil.
func Attention(q, k, v *Tensor, opts *Options) (*Tensor, error) {
	out, _, err := attentionAlloc(q, k, v, opts, false)
	return out, err
}

// AttentionLSE is Attention that also returns the natural log-sum-exp of
// each row's scaled, masked scores, [B][q.H][q.S] (-Inf for a row that sees
// no key).
func AttentionLSE(q, k, v *Tensor, opts *Options) (*Tensor, []float32, error) {
	return attentionAlloc(q, k, v, opts, true)
}

// AttentionInto is AttentionLSE writing into caller-owned memory: out must
// be a [B][q.H][q.S][D] tensor (its Data is overwritten) and lse nil or
// B·q.H·q.S long. After a first call of a shape it allocates nothing on the
// CPU backend, FP8E4M3 included. Invalid arguments are reported before
// anything is written; if a backend fails during the computation (a GPU
// error), out and lse hold unspecified values.
func AttentionInto(out *Tensor, lse []float32, q, k, v *Tensor, opts *Options) error {
	if err := checkAll(q.check, k.check, v.check, q == nil, k == nil, v == nil); err != nil {
		return err
	}
	return attentionInto(out, lse, q, k, v, opts)
}

// AttentionQuantized computes FP8E4M3 attention on already-quantized
// tensors (an FP8 KV cache, a query quantized with Quantize) without
// re-quantizing them, and returns the output and log-sum-exp.
// opts.Precision is ignored.
func AttentionQuantized(q, k, v *QuantizedTensor, opts *Options) (*Tensor, []float32, error) {
	if err := checkQuantized(q, k, v, opts); err != nil {
		return nil, nil, err
	}
	out, lse := allocOutputs(q.B, q.H, q.S, q.D, q.Layout, true)
	if err := AttentionQuantizedInto(out, lse, q, k, v, opts); err != nil {
		return nil, nil, err
	}
	return out, lse, nil
}

// AttentionQuantizedInto is AttentionQuantized writing into caller-owned
// memory, as AttentionInto does.
func AttentionQuantizedInto(out *Tensor, lse []float32, q, k, v *QuantizedTensor, opts *Options) error {
	if err := checkQuantized(q, k, v, opts); err != nil {
		return err
	}
	buf := getCallBuffers()
	defer buf.release()
	p := &buf.p
	if err := problem(p, shapeOf(q.B, q.H, q.S, q.D), shapeOf(k.B, k.H, k.S, k.D), shapeOf(v.B, v.H, v.S, v.D), opts); err != nil {
		return err
	}
	p.Precision = FP8E4M3
	if k.Layout != q.Layout || v.Layout != q.Layout {
		return fmt.Errorf("%w: q, k and v are in layouts %v, %v, %v; they must share one", ErrInvalid, q.Layout, k.Layout, v.Layout)
	}
	p.Layout = q.Layout
	if err := checkOutputs(p, out, lse); err != nil {
		return err
	}
	p.Q8, p.K8, p.V8 = q.Data, k.Data, v.Data
	p.QScale, p.KScale, p.VScale = q.Scales, k.Scales, v.Scales
	return runInto(nil, p, out, lse, opts)
}

func checkQuantized(q, k, v *QuantizedTensor, opts *Options) error {
	if err := checkAll(q.check, k.check, v.check, nilQuant(q), nilQuant(k), nilQuant(v)); err != nil {
		return err
	}
	if opts.transformsInputs() {
		return fmt.Errorf("%w: SmoothK, Hadamard and OutlierChannels transform float32 inputs before quantization; AttentionQuantized takes quantized ones", ErrInvalid)
	}
	return nil
}

// allocOutputs returns a fresh output tensor in layout l and, if withLSE,
// an LSE buffer.
func allocOutputs(b, h, s, d int, l Layout, withLSE bool) (*Tensor, []float32) {
	out := &Tensor{Data: make([]float32, b*h*s*d), B: b, H: h, S: s, D: d, Layout: l}
	if !withLSE {
		return out, nil
	}
	return out, make([]float32, b*h*s)
}

// attentionAlloc is Attention and AttentionLSE: checked inputs, fresh
// outputs, which are returned only on success.
func attentionAlloc(q, k, v *Tensor, opts *Options, withLSE bool) (*Tensor, []float32, error) {
	if err := checkAll(q.check, k.check, v.check, q == nil, k == nil, v == nil); err != nil {
		return nil, nil, err
	}
	out, lse := allocOutputs(q.B, q.H, q.S, q.D, q.Layout, withLSE)
	if err := attentionInto(out, lse, q, k, v, opts); err != nil {
		return nil, nil, err
	}
	return out, lse, nil
}

// checkAll checks q, k and v in order, naming each; a nil tensor is
// reported without calling its method.
func checkAll(q, k, v func(string) error, qNil, kNil, vNil bool) error {
	for i, c := range []struct {
		check func(string) error
		isNil bool
	}{{q, qNil}, {k, kNil}, {v, vNil}} {
		name := [...]string{"q", "k", "v"}[i]
		if c.isNil {
			return fmt.Errorf("%w: %s is nil", ErrInvalid, name)
		}
		if err := c.check(name); err != nil {
			return err
		}
	}
	return nil
}

func nilQuant(t *QuantizedTensor) bool { return t == nil }

type dims struct{ b, h, s, d int }

func shapeOf(b, h, s, d int) dims { return dims{b, h, s, d} }

// problem checks that q, k and v fit together, resolves the options, and
// fills p (reset first) with the shape and settings.
func problem(p *backend.Problem, q, k, v dims, opts *Options) error {
	if opts == nil {
		opts = &defaultOptions
	}
	switch {
	case k != v:
		return fmt.Errorf("%w: k is [%d][%d][%d][%d] but v is [%d][%d][%d][%d]; they must match",
			ErrInvalid, k.b, k.h, k.s, k.d, v.b, v.h, v.s, v.d)
	case q.b != k.b:
		return fmt.Errorf("%w: batch sizes differ: q has %d, k and v have %d", ErrInvalid, q.b, k.b)
	case q.d != k.d:
		return fmt.Errorf("%w: head dims differ: q has %d, k and v have %d", ErrInvalid, q.d, k.d)
	case q.h%k.h != 0:
		return fmt.Errorf("%w: q has %d heads, not a multiple of k's %d heads", ErrInvalid, q.h, k.h)
	}
	s, err := resolveScale(opts.Scale, q.d)
	if err != nil {
		return err
	}
	if opts.Mask < NoMask || opts.Mask > CausalLowerRight {
		return fmt.Errorf("%w: unknown mask %d", ErrInvalid, int(opts.Mask))
	}
	vr := opts.variants()
	if err := vr.Check(q.h, opts.Mask); err != nil {
		return err
	}
	if opts.SmoothK && (vr.Softcap != 0 || vr.Sinks != nil) {
		return fmt.Errorf("%w: SmoothK shifts each row's scores, which a softcap or sinks do not allow", ErrInvalid)
	}
	*p = backend.Problem{
		Shape: backend.Shape{B: q.b, Hq: q.h, Hkv: k.h, Sq: q.s, Sk: k.s, D: q.d},
		Scale: s, Mask: opts.Mask, Precision: opts.Precision, Variants: vr,
	}
	return nil
}

var defaultOptions Options

// resolveScale returns the score scale of Options.Scale s for head
// dimension d: s, or 1/sqrt(d) for 0; NaN and ±Inf are errors.
func resolveScale(s float32, d int) (float32, error) {
	if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
		return 0, fmt.Errorf("%w: scale is %v", ErrInvalid, s)
	}
	if s == 0 {
		s = float32(1 / math.Sqrt(float64(d)))
	}
	return s, nil
}

// attentionInto computes into out and lse for checked q, k and v, with the
// call's scratch (transformed inputs, FP8 copies, the parameter block) from
// a pool.
func attentionInto(out *Tensor, lse []float32, q, k, v *Tensor, opts *Options) error {
	buf := getCallBuffers()
	defer buf.release()
	p := &buf.p
	if err := problem(p, shapeOf(q.B, q.H, q.S, q.D), shapeOf(k.B, k.H, k.S, k.D), shapeOf(v.B, v.H, v.S, v.D), opts); err != nil {
		return err
	}
	if p.Precision != FP32 && p.Precision != FP8E4M3 {
		return fmt.Errorf("%w: unknown precision %d", ErrInvalid, int(p.Precision))
	}
	if k.Layout != q.Layout || v.Layout != q.Layout {
		return fmt.Errorf("%w: q, k and v are in layouts %v, %v, %v; they must share one", ErrInvalid, q.Layout, k.Layout, v.Layout)
	}
	p.Layout = q.Layout
	if err := checkOutputs(p, out, lse); err != nil {
		return err
	}
	outliers := 0
	if opts != nil {
		outliers = opts.OutlierChannels
	}
	if err := checkOutliers(outliers, q, k); err != nil {
		return err
	}
	tq, tk, means := buf.conditioned(q, k, opts)
	tv, tout := v, out
	if outliers > 0 {
		tq, tk, tv, tout = buf.outliers.widen(tq, tk, v, out, outliers)
		p.D = tq.D
	}
	var be backend.Backend // FP8: picked on the shape, to ask whether it quantizes on read
	if p.Precision == FP32 {
		p.Q, p.K, p.V = tq.Data, tk.Data, tv.Data
	} else {
		be, _ = backend.Select(backendName(opts), p) // nil: runInto says why, after validation
		if s, ok := be.(backend.OnReadScaler); ok && s.ScalesOnRead(p) {
			// The backend quantizes, scales included: no pass over the inputs here.
			p.Q, p.K, p.V, p.QuantizeOnRead, p.ScalesOnRead = tq.Data, tk.Data, tv.Data, true, true
		} else {
			r, ok := be.(backend.OnReadQuantizer)
			buf.quantize(p, tq, tk, tv, ok && r.QuantizesOnRead(p))
		}
	}
	if err := runInto(be, p, tout, lse, opts); err != nil {
		return err
	}
	if tout != out {
		narrow(out, tout)
	}
	if lse != nil && means != nil {
		correctLSE(lse, q, k.H, means, p.Scale)
	}
	return nil
}

// checkOutputs checks caller-owned outputs against p's shape.
func checkOutputs(p *backend.Problem, out *Tensor, lse []float32) error {
	if out == nil {
		return fmt.Errorf("%w: out is nil", ErrInvalid)
	}
	if err := out.check("out"); err != nil {
		return err
	}
	if out.B != p.B || out.H != p.Hq || out.S != p.Sq || out.D != p.D {
		return fmt.Errorf("%w: out is [%d][%d][%d][%d], the result is [%d][%d][%d][%d]", ErrInvalid, out.B, out.H, out.S, out.D, p.B, p.Hq, p.Sq, p.D)
	}
	if out.Layout != p.Layout {
		return fmt.Errorf("%w: out is in layout %v, the inputs in %v", ErrInvalid, out.Layout, p.Layout)
	}
	if lse != nil && len(lse) != p.B*p.Hq*p.Sq {
		return fmt.Errorf("%w: lse has %d elements, the result has %d rows", ErrInvalid, len(lse), p.B*p.Hq*p.Sq)
	}
	return nil
}

// callBuffers holds one call's scratch, reused across calls (the backend
// reads it only during the call): the parameter block, the transformed
// float32 copies of Q and K and the key means (accuracy options), the E4M3
// copies of Q, K and V with their scales, and the quantization job.
type callBuffers struct {
	p          backend.Problem
	tq, tk     []float32
	tqT, tkT   Tensor // headers of tq and tk
	means      []float64
	signs      []float32
	q8, k8, v8 []fp8.E4M3
	qs, ks, vs []float32
	job        quantJob
	outliers   outlierBuffers // Options.OutlierChannels
}

// callBufs is a free list, not a sync.Pool, so that a warm call allocates
// nothing even under the race detector; it holds one callBuffers per call
// ever in flight at once.
var callBufs freelist.List[callBuffers]

// varlenBufs holds the varlen calls' views and LSE scratch.
var varlenBufs freelist.List[varlenBuffers]

func getCallBuffers() *callBuffers { return callBufs.Get() }

// release drops the references to the caller's data and returns b to the
// pool.
func (b *callBuffers) release() {
	b.p = backend.Problem{}
	b.tqT, b.tkT = Tensor{}, Tensor{}
	clear(b.job.groups)
	b.job.groups = b.job.groups[:0]
	callBufs.Put(b)
}

// quantGroup is one (batch, head) bh of tensor t to quantize into codes
// (all of t's codes, in t's layout) with its scale in scale[0]:
// fp8.QuantizeE4M3's arithmetic, on the head's rows wherever the layout
// puts them. With codes nil it computes the scale only (for a backend
// that quantizes on read).
type quantGroup struct {
	codes []fp8.E4M3
	scale []float32
	t     *Tensor
	bh    int
}

func (g quantGroup) run() {
	t := g.t
	b, h := g.bh/t.H, g.bh%t.H
	var amax float32
	t.Layout.HeadRuns(b, h, t.H, t.S, t.D, func(o, n int) { amax = max(amax, fp8.Amax(t.Data[o:o+n])) })
	s := fp8.ScaleForAmax(amax)
	g.scale[0] = s
	if g.codes != nil {
		t.Layout.HeadRuns(b, h, t.H, t.S, t.D, func(o, n int) { fp8.EncodeE4M3(g.codes[o:o+n], t.Data[o:o+n], s, fp8.NoSat) })
	}
}

// quantJob is a list of groups that the caller and the helpers of
// par.Default take one at a time (a par.Job).
type quantJob struct {
	groups []quantGroup
	next   atomic.Int64
}

func (j *quantJob) Work(int) {
	for i := j.next.Add(1) - 1; i < int64(len(j.groups)); i = j.next.Add(1) - 1 {
		j.groups[i].run()
	}
}

// parallelQuantizeMin is the element count from which quantization is split
// across goroutines; below it a goroutine costs more than it saves.
const parallelQuantizeMin = 1 << 16

// quantize fills p's FP8 inputs from q, k and v: one amax scale per (batch,
// head), fp8.QuantizeE4M3's arithmetic, with the (batch, head) groups of all
// three tensors shared with the helpers of par.Default. With onRead it
// computes the scales only and hands the backend the float32 tensors to
// quantize as it reads them (backend.Problem.QuantizeOnRead).
func (b *callBuffers) quantize(p *backend.Problem, q, k, v *Tensor, onRead bool) {
	b.qs, b.ks, b.vs = freelist.Grow(b.qs, q.B*q.H), freelist.Grow(b.ks, k.B*k.H), freelist.Grow(b.vs, v.B*v.H)
	if !onRead {
		b.q8, b.k8, b.v8 = freelist.Grow(b.q8, len(q.Data)), freelist.Grow(b.k8, len(k.Data)), freelist.Grow(b.v8, len(v.Data))
	}
	j := &b.job
	j.groups = j.groups[:0]
	for _, t := range [3]struct {
		codes  []fp8.E4M3
		scales []float32
		x      *Tensor
	}{{b.q8, b.qs, q}, {b.k8, b.ks, k}, {b.v8, b.vs, v}} {
		if onRead {
			t.codes = nil
		}
		for g := range t.scales {
			j.groups = append(j.groups, quantGroup{codes: t.codes, scale: t.scales[g : g+1], t: t.x, bh: g})
		}
	}
	j.next.Store(0)
	helpers := 0
	if total := len(q.Data) + 2*len(k.Data); total >= parallelQuantizeMin {
		helpers = min(len(j.groups)-1, total/parallelQuantizeMin-1)
	}
	par.Default.Run(helpers, j)
	p.QScale, p.KScale, p.VScale = b.qs, b.ks, b.vs
	if onRead {
		p.Q, p.K, p.V, p.QuantizeOnRead = q.Data, k.Data, v.Data, true
	} else {
		p.Q8, p.K8, p.V8 = b.q8, b.k8, b.v8
	}
}

// runInto validates p with out and lse as its outputs and computes it on be,
// or, if be is nil, on the backend Select picks.
func runInto(be backend.Backend, p *backend.Problem, out *Tensor, lse []float32, opts *Options) error {
	p.Out, p.LSE = out.Data, lse
	if err := p.Validate(); err != nil {
		return err
	}
	if be == nil {
		var err error
		if be, err = backend.Select(backendName(opts), p); err != nil {
			return err
		}
	}
	if err := be.Attention(p); err != nil {
		return fmt.Errorf("sdpa: backend %s: %w", be.Name(), err)
	}
	return nil
}

// backendName is the backend opts names ("" for none).
func backendName(opts *Options) string {
	if opts == nil {
		return ""
	}
	return opts.Backend
}
