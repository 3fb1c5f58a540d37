// Package sdpatest is the conformance suite every backend and every GPU
// kernel stage must pass, in the manner of gonum's blas/testblas: one table
// of cases (random shapes with odd lengths, Sq != Sk, GQA and MQA, every mask,
// head dims 16..256, extreme magnitudes, NaN propagation, the attention
// variants: sliding windows, softcaps, sinks) and properties (permuting keys
// changes nothing without a mask; GQA equals repeated heads; a sink only
// scales each row by 1/(1 + e^(sink - LSE))), run with fresh random inputs
// on every call, against the float64 oracle. A backend that does not
// implement a variant answers ErrUnsupported for it, and its cases skip.
//
// Outputs are poisoned before the backend runs and surrounded by guard
// regions, so an element the backend never wrote, or one it wrote out of
// bounds, fails the case. A run in which every case was skipped as
// unsupported fails: nothing was tested. Every case asks for the LSE; a
// backend that computes less without one (Config.WithoutLSE) runs each
// case again without it and must write the same output bits.
//
// Each output element is held to a tolerance derived from the backend's
// arithmetic (Tolerance). Where that is a worst case far above what a
// correct backend shows (the FP8 tensor-core kernels'), Config.RMSTol also
// bounds the output's root-mean-square error by what the backend's
// rounding of the weights is expected to cost (FP8MMARMSTolerance): a
// kernel that weighs a row's keys wrongly moves many outputs a little.
//
// # NaN rule
//
// Every backend keeps this rule, and the nan-propagation case checks it
// element by element:
//
//   - NaN in Q row i makes row i of that head NaN if it sees any key, and
//     nothing else;
//   - NaN in K at key j makes NaN every row that sees key j (its score is
//     NaN), and nothing else: masked scores are replaced, not multiplied;
//   - NaN in V at key j, column d, makes column d NaN in every row that sees
//     key j. A backend whose P·V multiplies the weights of masked keys
//     (exactly 0) by V, as a dense product does (the GPU kernels, on the key
//     tiles they load; PyTorch's math backend, on all keys), also makes
//     column d NaN in the other rows of that (batch, KV head) that multiply
//     key j; Config.LoadedKeys states which, and the suite holds the backend
//     to exactly that set. The CPU backend and the reference multiply only
//     the keys a row sees. Rows that see no key stay 0; other columns and
//     other heads are never touched.
//
// With a sliding window, "sees" means inside the row's window: a NaN key
// before a row's window leaves the row finite, and a row whose window holds
// no key is zeros with LSE -Inf, sinks or not (its output is 0/e^sink).
// The nan-propagation-variants case checks it under both causal
// alignments, with a softcap and sinks.
package sdpatest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/fp8mma"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/internal/seed"
	"github.com/fp8attn/fp8attn/oracle"
)

// Tolerance bounds the elementwise error: |got - want| <= Atol + Rtol·|want|.
type Tolerance struct {
	Atol, Rtol float64
	// Why records where the numbers come from, for reports.
	Why string
}

// ScoreBound returns M = |scale|·max‖q_i‖·max‖k_j‖, a bound on the magnitude
// of every score of p (on the dequantized inputs for FP8E4M3), and the largest
// |v|. Rounding errors in a score are relative to M, and exp turns a score's
// absolute error into a relative error of its weight.
func ScoreBound(p *backend.Problem) (m, vmax float64) {
	if p == nil {
		return 0, 0
	}
	q, k, v := oracle.Inputs(p)
	norm := func(x []float64) float64 {
		var mx float64
		for i := 0; i+p.D <= len(x); i += p.D {
			var ss float64
			for _, e := range x[i : i+p.D] {
				if !math.IsNaN(e) {
					ss += e * e
				}
			}
			mx = max(mx, math.Sqrt(ss))
		}
		return mx
	}
	for _, e := range v {
		if !math.IsNaN(e) {
			vmax = max(vmax, math.Abs(e))
		}
	}
	return math.Abs(float64(p.Scale)) * norm(q) * norm(k), vmax
}

// FP32Tolerance is the bound for a backend that computes in float32 on the
// same (possibly dequantized) inputs as the oracle: each score carries an
// absolute error of a few eps32·M, which becomes the relative error of its
// weight; 16·eps32·(1+M), relative and times max|v| absolute, covers it.
//
// A softcap c replaces a score s by c·tanh(s/c), whose derivative is at
// most 1: the score's error passes through undiminished, and evaluating
// c·tanh in float32 adds a few eps32 of its result, at most c in magnitude;
// 16·eps32·c is added to the score error (softcapError). A sink adds one
// term e^(sink - m) to the denominator, whose relative error is the score
// error of m: the bound covers it.
func FP32Tolerance(p *backend.Problem) Tolerance {
	if p == nil {
		return noProblem
	}
	m, vmax := ScoreBound(p)
	c := softcapBound(p)
	e := 16 * eps32 * (1 + m + c)
	return Tolerance{Atol: e * max(vmax, 1e-30), Rtol: e, Why: fmt.Sprintf("float32: 16·eps32·(1+M+c), M=%.3g, softcap c=%.3g", m, c)}
}

// softcapBound is p's softcap c (0 for none): the bound on |c·tanh(s/c)|
// that the float32 evaluation of the softcap rounds relative to.
func softcapBound(p *backend.Problem) float64 { return float64(p.Softcap) }

// F16PTolerance is the bound for a kernel that also rounds the softmax
// weights P (in [0,1]) to float16 before P·V, accumulating in float32: each
// weight gains a relative error up to 2^-11, which moves an output by at
// most 2^-11·max|v| (the weights sum to 1); 4·2^-11 relative and
// 4·2^-11·max|v| absolute are added to the float32 bound.
func F16PTolerance(p *backend.Problem) Tolerance {
	if p == nil {
		return noProblem
	}
	_, vmax := ScoreBound(p)
	t := FP32Tolerance(p)
	t.Rtol += 4.0 / 2048
	t.Atol += 4.0 / 2048 * vmax
	t.Why = "P rounded to float16: 4·2^-11·(1, max|v|) + " + t.Why
	return t
}

// FP8PTolerance is the bound for a kernel that rounds the softmax weights
// to E4M3 before P·V and normalizes each row by the sum of the rounded
// weights (the Hopper and Ada kernels, which scale the weights by 2^8
// first, so that a weight p in [2^-14, 1] is a normal E4M3 number after
// scaling). With the row's largest weight 1, so that Σp >= 1, a rounded
// weight is p̂ = p + e with |e| <= 2^-4·p (3 mantissa bits, round to
// nearest) or, subnormal, |e| <= 2^-18 (half of E4M3's 2^-9 spacing, over
// 2^8). The output o' = Σp̂v/Σp̂ satisfies Σ(p + e)(v - o') = 0, so
// o - o' = Σe(v - o')/Σp, and o' being a weighted mean of the column's
// values, |v - o'| is at most V's range (max v - min v): an output moves by
// at most (2^-4 + Sk·2^-18)·range, added to the float32 bound. This is a
// worst case; on random inputs the errors of many weights average out (the
// accuracy tests hold the kernel to that).
func FP8PTolerance(p *backend.Problem) Tolerance {
	if p == nil {
		return noProblem
	}
	t := FP32Tolerance(p)
	r := valueRange(p)
	t.Atol += (1.0/16 + float64(p.Sk)/(1<<18)) * r
	t.Why = fmt.Sprintf("P rounded to E4M3 after ·2^8, rows normalized by the rounded sum: (2^-4 + Sk·2^-18)·range(v), range %.3g + ", r) + t.Why
	return t
}

// valueRange is max v - min v over p's (dequantized) values, NaN left out.
func valueRange(p *backend.Problem) float64 {
	_, _, v := oracle.Inputs(p)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, e := range v {
		if !math.IsNaN(e) {
			lo, hi = min(lo, e), max(hi, e)
		}
	}
	if hi < lo {
		return 0
	}
	return hi - lo
}

// FP8MMAScoreError bounds the absolute error of every score of p computed
// by FP8 tensor cores: Hopper's (wgmma e4m3, QGMMA in SASS) and Ada's
// (mma.sync m16n8k32 e4m3, QMMA). Their products are exact, but Hopper's
// adds each k step of 32 products into the float32 accumulator with about
// 14 significant bits, truncating (fp8mma's package doc); the bound is
// fp8mma.ErrorBound of each (query row, visible key) pair's codes times
// |scale|·(the two heads' scales), the largest over p (pairs with NaN codes
// left out: their scores must be NaN). Ada's internal sum
// width is undocumented and not measured here (no L4 is lent); it is
// assumed no narrower. Without codes (p not FP8E4M3) it is the same bound
// with every step's largest term at M = |scale|·max‖q‖·max‖k‖ (ScoreBound).
func FP8MMAScoreError(p *backend.Problem) float64 {
	if p == nil {
		return 0
	}
	s := p.Shape
	if p.Precision != backend.FP8E4M3 || len(p.Q8) == 0 || len(p.K8) == 0 {
		m, _ := ScoreBound(p)
		return float64((s.D+31)/32) * fp8mma.StepBound(m)
	}
	var e float64
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.Hq; h++ {
			kvh := h / s.Group()
			f := math.Abs(float64(p.Scale)) * float64(p.QScale[b*s.Hq+h]) * float64(p.KScale[b*s.Hkv+kvh])
			for i := 0; i < s.Sq; i++ {
				q := p.Q8[p.Layout.Offset(b, h, i, s.Hq, s.Sq, s.D):][:s.D]
				lo, hi := p.KeyRange(i)
				for j := lo; j < hi; j++ {
					k := p.K8[p.Layout.Offset(b, kvh, j, s.Hkv, s.Sk, s.D):][:s.D]
					if b := fp8mma.ErrorBound(q, k) * f; b > e { // a NaN score (NaN codes) has no bound; the NaN rule checks it
						e = b
					}
				}
			}
		}
	}
	return e
}

// FP8PVError bounds what P·V on FP8 tensor cores adds to an output beyond
// FP8PTolerance (P rounded to E4M3), by fp8mma's bound: each k step of 32
// keys truncates at most fp8mma.StepTruncations terms, each by less than
// 2^-13 of the largest magnitude in play. The weights are scaled by 2^8 and
// sum to l >= 1 (the running maximum's weight is 1), so every term is at
// most 2^8·l·max|v|·(1 + 2^-3) (the rounding of P and the errors so far),
// and the output, the accumulator over 2^8·l, moves by less than
// StepTruncations·2^-13·(1 + 2^-3)·max|v| a step. The steps run over the
// keys a kernel loads, at most Sk rounded up to a 256-key tile: (Sk +
// 255)/32 of them. A worst case.
func FP8PVError(p *backend.Problem) float64 {
	if p == nil {
		return 0
	}
	_, vmax := ScoreBound(p)
	steps := float64((p.Sk + 255) / 32)
	return fp8mma.StepTruncations * steps * (1 + 1.0/8) / (1 << 13) * vmax
}

// FP8MMATolerance is the output bound of the kernels with both GEMMs on FP8
// tensor cores (stage 9, Hopper; stage 10, Ada): P rounded to E4M3
// (FP8PTolerance), P·V's truncations (FP8PVError) and the same again for
// the row sums, which the tensor cores compute as P times ones (an error ε
// of the normalizer moves an output by ε·|o| <= ε·max|v|, and the sums'
// bound is FP8PVError's with every v = 1), and scores off by at most e =
// FP8MMAScoreError, which changes each normalized weight by a factor within
// exp(±2e), so an output by at most (exp(2e)-1)·max|v|; a softcap's tanh
// adds TanhApproxError to e.
func FP8MMATolerance(p *backend.Problem) Tolerance {
	if p == nil {
		return noProblem
	}
	_, vmax := ScoreBound(p)
	e, pv := FP8MMAScoreError(p)+TanhApproxError(p), FP8PVError(p)
	t := FP8PTolerance(p)
	t.Atol += math.Expm1(2*e)*vmax + 2*pv
	t.Why = fmt.Sprintf("FP8 MMA: scores (e^(2e)-1)·max|v|, e=%.3g, P·V and row sums 2·%.3g + ", e, pv) + t.Why
	return t
}

// TanhApproxRelative and TanhApproxAbsolute bound the GPU kernels' tanh
// of a softcap (tanh.approx.f32): within |tanh(x)|·TanhApproxRelative +
// TanhApproxAbsolute of tanh(x), the relative error the PTX ISA states
// (2^-10.987) and, for inputs so small that the special-function unit
// flushes them, the smallest normal float32. backend/cuda's
// TestTanhApprox measures the GPU's tanh against them.
const (
	TanhApproxRelative = 4.927009930882233e-4 // 2^-10.987
	TanhApproxAbsolute = 0x1p-126
)

// TanhApproxError bounds what a softcap computed on the GPU's special-
// function unit (TanhApproxRelative, TanhApproxAbsolute) adds to a score
// beyond the error of the score it caps (c·tanh(s/c) is 1-Lipschitz in s):
// c·|tanh(s/c)| <= min(c, |s|), so at most min(c, M)·TanhApproxRelative +
// c·TanhApproxAbsolute, M ScoreBound's score bound. 0 without a softcap.
func TanhApproxError(p *backend.Problem) float64 {
	if p == nil {
		return 0
	}
	if p.Softcap == 0 {
		return 0
	}
	m, _ := ScoreBound(p)
	c := float64(p.Softcap)
	return min(c, m)*TanhApproxRelative + c*TanhApproxAbsolute
}

// FP8MMALSETolerance is the LSE bound of stages 9 and 10: LSETolerance
// plus the score error (LSE is 1-Lipschitz in each score), a softcap's
// tanh included (TanhApproxError).
func FP8MMALSETolerance(p *backend.Problem) Tolerance {
	if p == nil {
		return noProblem
	}
	t := LSETolerance(p)
	e := FP8MMAScoreError(p) + TanhApproxError(p)
	t.Atol += e
	t.Why = fmt.Sprintf("scores by FP8 MMA: %.3g + ", e) + t.Why
	return t
}

// LSETolerance is the bound for the log-sum-exp of a backend that computes
// the scores and the row sums in float32 (every backend and kernel stage:
// rounding P to float16 or E4M3 for P·V does not touch the sum). LSE is
// 1-Lipschitz in each score, so the scores' absolute error of 16·eps32·(1+M)
// (FP32Tolerance) carries over one to one; the row sum l is a float32 sum of
// at most Sk positive terms, added at most 64 at a time and then over at most
// Sk/16 partial sums, whose relative error (64+Sk/16)·eps32 becomes an
// absolute error of log(l); the final rounding adds 2·eps32 relative.
// A softcap adds 16·eps32·c to the scores' error, as in FP32Tolerance; the
// LSE is over the keys only, so a sink does not enter it.
func LSETolerance(p *backend.Problem) Tolerance {
	if p == nil {
		return noProblem
	}
	m, _ := ScoreBound(p)
	c := softcapBound(p)
	a := 16*eps32*(1+m+c) + (64+float64(p.Sk)/16)*eps32
	return Tolerance{Atol: a, Rtol: 2 * eps32, Why: fmt.Sprintf("LSE: 16·eps32·(1+M+c) + (64+Sk/16)·eps32, M=%.3g, c=%.3g", m, c)}
}

const eps32 = 1.0 / (1 << 23)

// noProblem is every tolerance of a nil problem: none (a nil problem has
// no output to compare; the tolerance and error functions return their
// zero values for it rather than panic).
var noProblem = Tolerance{Why: "no problem (nil)"}

// NamedShapes are the benchmark shapes every runner and benchmark uses:
// small, mission (the shape the project's targets are set on), long, and
// large. Heads are not grouped (Hq = Hkv).
var NamedShapes = map[string]backend.Shape{
	"small":   {B: 1, Hq: 2, Hkv: 2, Sq: 64, Sk: 64, D: 64},
	"mission": {B: 2, Hq: 8, Hkv: 8, Sq: 256, Sk: 256, D: 64},
	"long":    {B: 1, Hq: 8, Hkv: 8, Sq: 2048, Sk: 2048, D: 64},
	"large":   {B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128},
}

// ParseShape reads a shape as the runners spell it: a name of NamedShapes,
// BxHxSqxSkxD (Hq = Hkv = H), or BxHqxHkvxSqxSkxD; every size a positive
// int. Whether the backend takes the shape (Shape.Validate) is not checked.
func ParseShape(s string) (backend.Shape, error) {
	if sh, ok := NamedShapes[s]; ok {
		return sh, nil
	}
	var n []int
	for _, f := range strings.Split(s, "x") {
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return backend.Shape{}, fmt.Errorf("shape %q: want a name (small, mission, long, large) or BxHxSqxSkxD", s)
		}
		n = append(n, v)
	}
	var sh backend.Shape
	switch len(n) {
	case 5:
		sh = backend.Shape{B: n[0], Hq: n[1], Hkv: n[1], Sq: n[2], Sk: n[3], D: n[4]}
	case 6:
		sh = backend.Shape{B: n[0], Hq: n[1], Hkv: n[2], Sq: n[3], Sk: n[4], D: n[5]}
	default:
		return backend.Shape{}, fmt.Errorf("shape %q: want BxHxSqxSkxD or BxHqxHkvxSqxSkxD", s)
	}
	_, okQ := checked.Mul(sh.B, sh.Hq, sh.Sq, sh.D)
	_, okK := checked.Mul(sh.B, sh.Hkv, sh.Sk, sh.D)
	_, okS := checked.Mul(sh.B, sh.Hq, sh.Sq, sh.Sk)
	if !okQ || !okK || !okS {
		return backend.Shape{}, fmt.Errorf("shape %q: its tensors' or scores' element counts overflow int", s)
	}
	return sh, nil
}

// Seed returns the seed for a run's random inputs: FP8ATTN_SEED if set (to
// reproduce a failure), otherwise a fresh one from the clock. Callers log it.
func Seed() uint64 { return seed.Get() }

// Inputs are the float32 tensors of one case, before any quantization,
// and its sink logits (nil: no sinks).
type Inputs struct {
	Q, K, V []float32
	Sinks   []float32
}

// RandomSinks draws one sink logit per query head of s: ln(Sk) + 2·N(0, 1),
// about where a row's log-sum-exp lies for inputs of unit variance, so that
// the sink takes from a few percent to most of a row's weight.
func RandomSinks(rng *rand.Rand, s backend.Shape) []float32 {
	x := make([]float32, s.Hq)
	for h := range x {
		x[h] = float32(math.Log(float64(s.Sk)) + 2*rng.NormFloat64())
	}
	return x
}

// RandomInputs draws Q, K and V with entries from N(0, sigma²).
func RandomInputs(rng *rand.Rand, s backend.Shape, sigma float64) Inputs {
	draw := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * sigma)
		}
		return x
	}
	return Inputs{Q: draw(s.B * s.Hq * s.Sq * s.D), K: draw(s.B * s.Hkv * s.Sk * s.D), V: draw(s.B * s.Hkv * s.Sk * s.D)}
}

// RampKeys multiplies key j of every head of k ([B][Hkv][Sk][D]) by
// 1 + ramp·j/Sk. It leaves k as it is for ramp 0 and for a shape without
// keys or head dims.
func RampKeys(k []float32, s backend.Shape, ramp float64) {
	if ramp == 0 || s.D <= 0 || s.Sk <= 0 {
		return
	}
	for i := range k {
		j := i / s.D % s.Sk
		k[i] *= float32(1 + ramp*float64(j)/float64(s.Sk))
	}
}

// Poison is the bit pattern written into outputs before a backend runs (a
// quiet NaN with a payload no arithmetic produces).
const Poison = poison.Bits

// GuardLen is the number of poisoned elements on each side of an output.
const GuardLen = 64

// Guarded is an output buffer with poisoned guard regions on both sides.
type Guarded struct {
	buf []float32
	n   int
}

// NewGuarded returns a poisoned buffer of n elements inside guards.
func NewGuarded(n int) *Guarded {
	n = max(n, 0) // (no elements for a negative n)
	g := &Guarded{buf: make([]float32, n+2*GuardLen), n: n}
	p := math.Float32frombits(Poison)
	for i := range g.buf {
		g.buf[i] = p
	}
	return g
}

// Data returns the n elements between the guards.
func (g *Guarded) Data() []float32 { return g.buf[GuardLen : GuardLen+g.n] }

// Check returns an error if a guard element changed or an element of the
// data was never written (still holds the poison pattern).
func (g *Guarded) Check(what string) error {
	if g == nil {
		return fmt.Errorf("%s: a nil Guarded", what)
	}
	for i, x := range g.buf {
		inGuard := i < GuardLen || i >= GuardLen+g.n
		poisoned := math.Float32bits(x) == Poison
		if inGuard && !poisoned {
			return fmt.Errorf("%s: guard element %d overwritten (out-of-bounds write)", what, i-GuardLen)
		}
		if !inGuard && poisoned {
			return fmt.Errorf("%s: element %d never written", what, i-GuardLen)
		}
	}
	return nil
}

// NewProblem builds a problem from in: for FP8E4M3 it quantizes Q, K and V
// with one amax scale per (batch, head). Out and LSE are guarded, poisoned
// buffers; the caller checks them with the returned guards.
func NewProblem(s backend.Shape, in Inputs, scale float32, m backend.Mask, prec backend.Precision) (*backend.Problem, *Guarded, *Guarded) {
	return NewProblemLayout(s, in, scale, m, prec, backend.BHSD)
}

// NewProblemLayout is NewProblem with Q, K, V and Out in layout l; in is
// [B][H][S][D] and is permuted (after quantization: the codes and scales
// are the same as NewProblem's).
func NewProblemLayout(s backend.Shape, in Inputs, scale float32, m backend.Mask, prec backend.Precision, l backend.Layout) (*backend.Problem, *Guarded, *Guarded) {
	p, out, lse := newProblemBHSD(s, in, scale, m, prec)
	if l == backend.BHSD {
		return p, out, lse
	}
	p.Layout = l
	perm := func(x []float32, h, n int) []float32 { return layout.Permute(x, s.B, h, n, s.D, l) }
	perm8 := func(x []fp8.E4M3, h, n int) []fp8.E4M3 { return layout.Permute(x, s.B, h, n, s.D, l) }
	p.Q, p.K, p.V = perm(p.Q, s.Hq, s.Sq), perm(p.K, s.Hkv, s.Sk), perm(p.V, s.Hkv, s.Sk)
	p.Q8, p.K8, p.V8 = perm8(p.Q8, s.Hq, s.Sq), perm8(p.K8, s.Hkv, s.Sk), perm8(p.V8, s.Hkv, s.Sk)
	return p, out, lse
}

func newProblemBHSD(s backend.Shape, in Inputs, scale float32, m backend.Mask, prec backend.Precision) (*backend.Problem, *Guarded, *Guarded) {
	p := &backend.Problem{Shape: s, Scale: scale, Mask: m, Precision: prec}
	if prec == backend.FP8E4M3 {
		p.Q8, p.QScale, _ = fp8.QuantizeE4M3(in.Q, s.Sq*s.D)
		p.K8, p.KScale, _ = fp8.QuantizeE4M3(in.K, s.Sk*s.D)
		p.V8, p.VScale, _ = fp8.QuantizeE4M3(in.V, s.Sk*s.D)
	} else {
		p.Q, p.K, p.V = in.Q, in.K, in.V
	}
	out, lse := NewGuarded(s.B*s.Hq*s.Sq*s.D), NewGuarded(s.B*s.Hq*s.Sq)
	p.Out, p.LSE = out.Data(), lse.Data()
	return p, out, lse
}

// float is the element type Compare reads.
type float interface{ ~float32 | ~float64 }

// Stats summarises how far got is from want.
type Stats struct {
	MaxErr, MeanErr float64 // absolute errors over elements where both are finite
	RelL2           float64 // ‖got - want‖₂ / ‖want‖₂
	RMS             float64 // root-mean-square of got - want over the Finite elements
	Finite          int     // elements where both are finite
	Beyond          int     // elements outside the tolerance (NaN mismatches included)
	N               int
	FirstBad        int // index of the first element beyond tolerance, or -1
}

// FracBeyond returns the fraction of elements outside the tolerance.
func (s Stats) FracBeyond() float64 { return float64(s.Beyond) / float64(max(s.N, 1)) }

// Compare measures got against want under tol. A NaN in one and not the
// other counts as beyond tolerance, as does ±Inf unless both agree; NaN never
// passes against a finite reference. An element of want that got lacks (got
// shorter) is beyond tolerance too.
func Compare[G, W float](got []G, want []W, tol Tolerance) Stats {
	st := Stats{N: len(want), FirstBad: -1}
	var num, den float64
	for i := range want {
		w := float64(want[i])
		ok := false
		g := math.NaN()
		if i < len(got) {
			g = float64(got[i])
		}
		switch {
		case i >= len(got):
		case math.IsNaN(w) || math.IsNaN(g):
			ok = math.IsNaN(w) && math.IsNaN(g)
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			ok = g == w
		default:
			e := math.Abs(g - w)
			st.Finite++
			st.MaxErr = max(st.MaxErr, e)
			st.MeanErr += e
			num += e * e
			den += w * w
			ok = e <= tol.Atol+tol.Rtol*math.Abs(w)
		}
		if !ok {
			st.Beyond++
			if st.FirstBad < 0 {
				st.FirstBad = i
			}
		}
	}
	st.MeanErr /= float64(max(st.N, 1))
	if den > 0 {
		st.RelL2 = math.Sqrt(num / den)
	}
	if st.Finite > 0 {
		st.RMS = math.Sqrt(num / float64(st.Finite))
	}
	return st
}

// ToleranceFor returns the tolerance rule for a backend by name: the
// Hopper and Ada kernels ("cuda/sm90", "cuda/sm89") compute scores on FP8
// tensor cores and round P to E4M3 (FP8MMATolerance), and "cuda" runs one
// of those on sm_89 and sm_90 GPUs; Ampere's kernels ("cuda/sm80") and the
// ladder stages ("cuda/stageN", run by name through internal/kernelreg)
// round P to float16 before P·V (F16PTolerance); every other backend
// computes in float32 or better (FP32Tolerance).
func ToleranceFor(name string) func(*backend.Problem) Tolerance {
	switch {
	case fp8MMABackend(name):
		return FP8MMATolerance
	case strings.HasPrefix(name, "cuda"):
		return F16PTolerance
	}
	return FP32Tolerance
}

// fp8MMABackend reports whether the backend named name is held to the FP8
// tensor cores' tiers (ToleranceFor, RMSToleranceFor).
func fp8MMABackend(name string) bool {
	return name == "cuda" || name == "cuda/sm90" || name == "cuda/sm89"
}
