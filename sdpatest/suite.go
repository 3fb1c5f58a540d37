package sdpatest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/oracle"
)

// Case is one row of the conformance table.
type Case struct {
	Name   string
	Shape  backend.Shape
	Mask   backend.Mask
	Sigma  float64 // standard deviation of the inputs
	Scale  float32 // 0: 1/sqrt(D)
	Layout backend.Layout
	// Window and Softcap are the problem's sliding window and softcap;
	// Sinks asks for random sink logits (RandomSinks).
	Window  int
	Softcap float32
	Sinks   bool
	// KeyRamp multiplies key j by 1 + KeyRamp·j/Sk (RampKeys), so that the
	// scores' magnitudes rise along the keys and each row's maximum grows
	// from one tile of keys to the next by several units, which a kernel's
	// online rescale of its earlier tiles must follow.
	KeyRamp float64
}

// namedShape is a shape of the table with the name its cases carry.
type namedShape struct {
	name string
	s    backend.Shape
}

// variantCases are the rows of the table with attention variants: windows
// narrower than, about, and wider than the keys under both causal
// alignments (with Sq above and below Sk, so that some rows' windows hold
// no key), softcaps that bind (large values) and that barely do, sinks
// alone and all three together, in both layouts.
func variantCases() []Case {
	var cases []Case
	causal := []backend.Mask{backend.CausalUpperLeft, backend.CausalLowerRight}
	for _, sh := range []namedShape{
		{"odd", backend.Shape{B: 2, Hq: 3, Hkv: 3, Sq: 33, Sk: 77, D: 48}},
		{"sq>sk", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 130, Sk: 40, D: 64}},
		{"long-keys", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 64, Sk: 600, D: 64}},
	} {
		for _, w := range []int{1, 16, 100} {
			for _, m := range causal {
				cases = append(cases, Case{Name: fmt.Sprintf("window=%d/%s/%v", w, sh.name, m), Shape: sh.s, Mask: m, Sigma: 1, Window: w})
			}
		}
	}
	gqa := backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 40, Sk: 72, D: 64}
	for _, m := range []backend.Mask{backend.NoMask, backend.CausalLowerRight} {
		cases = append(cases,
			Case{Name: fmt.Sprintf("softcap=5/large-values/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 40, Sk: 50, D: 64}, Mask: m, Sigma: 30, Softcap: 5},
			Case{Name: fmt.Sprintf("softcap=50/gqa/%v", m), Shape: gqa, Mask: m, Sigma: 1, Softcap: 50},

			Case{Name: fmt.Sprintf("sinks/gqa/%v", m), Shape: gqa, Mask: m, Sigma: 1, Sinks: true},
			Case{Name: fmt.Sprintf("sinks/decode/%v", m), Shape: backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 1, Sk: 77, D: 64}, Mask: m, Sigma: 1, Sinks: true})
	}
	for _, m := range causal {
		// A window of 66 over 200 rows: groups of four rows whose lower
		// edges straddle a panel's first key while they see all of its
		// end (the rows past the edge must not take a full panel).
		cases = append(cases, Case{Name: fmt.Sprintf("window=66/edges/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 200, Sk: 260, D: 64},
			Mask: m, Sigma: 1, Window: 66})
		// Scores in the thousands under a window (a score factor above 1 in
		// the log2 domain, even in FP8): rows whose windows start on a
		// tile's first key see only masked keys in their block's first
		// tile, and must come out of it with no NaN.
		cases = append(cases, Case{Name: fmt.Sprintf("window=20/large-scores/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 150, Sk: 150, D: 64},
			Mask: m, Sigma: 1, Scale: 3e4, Window: 20})
		// A small cap under a window: masked keys must stay out, not come
		// back with the cap's floor -c.
		cases = append(cases, Case{Name: fmt.Sprintf("softcap=2/window=16/odd/%v", m), Shape: backend.Shape{B: 2, Hq: 3, Hkv: 3, Sq: 33, Sk: 77, D: 48},
			Mask: m, Sigma: 1, Softcap: 2, Window: 16})
		// Windows over a few tiles of 64 and 128 keys at the larger head
		// dims, with the other variants: blocks that start past the first
		// tile, and window edges inside tiles.
		cases = append(cases,
			Case{Name: fmt.Sprintf("all/window=100/d128/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 200, Sk: 450, D: 128},
				Mask: m, Sigma: 1, Window: 100, Softcap: 20, Sinks: true},
			Case{Name: fmt.Sprintf("softcap=30/window=70/d256/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 130, Sk: 300, D: 256},
				Mask: m, Sigma: 1, Window: 70, Softcap: 30},
			Case{Name: fmt.Sprintf("all/window=40/d80/%v", m), Shape: backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 90, Sk: 160, D: 80},
				Mask: m, Sigma: 1, Window: 40, Softcap: 15, Sinks: true},
			// The other head dims: 96 and 192 have kernels of their own
			// (but 192 on Ada); 160, and 192 on Ada, run on the next one
			// up.
			Case{Name: fmt.Sprintf("all/window=50/d96/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 100, Sk: 230, D: 96},
				Mask: m, Sigma: 1, Window: 50, Softcap: 12, Sinks: true},
			Case{Name: fmt.Sprintf("all/window=90/d160/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 90, Sk: 200, D: 160},
				Mask: m, Sigma: 1, Window: 90, Softcap: 25, Sinks: true},
			Case{Name: fmt.Sprintf("all/window=70/d192/%v", m), Shape: backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 130, Sk: 260, D: 192},
				Mask: m, Sigma: 1, Window: 70, Softcap: 30, Sinks: true})
		// Windows of whole 64-key tiles (as the models' 128, 1024 and 4096
		// are) over enough rows that a group of four rows sees its
		// window's first tile from some key on and its last up to the same
		// place; in two of them Sk-Sq is odd, so that under lower-right
		// alignment the rows' windows start off a multiple of four.
		cases = append(cases,
			Case{Name: fmt.Sprintf("all/window=128/%v", m), Shape: backend.Shape{B: 1, Hq: 4, Hkv: 1, Sq: 150, Sk: 333, D: 64},
				Mask: m, Sigma: 1, Window: 128, Softcap: 20, Sinks: true},
			Case{Name: fmt.Sprintf("window=64/d128/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 140, Sk: 141, D: 128},
				Mask: m, Sigma: 1, Window: 64},
			Case{Name: fmt.Sprintf("sinks/window=192/d32/%v", m), Shape: backend.Shape{B: 2, Hq: 2, Hkv: 1, Sq: 260, Sk: 260, D: 32},
				Mask: m, Sigma: 1, Window: 192, Sinks: true})
		// A window wider than a few tiles, its edge inside one: a block of
		// rows sees more tiles than a backend may take in one pass, and the
		// rows of a group start at different keys of the edge's tile.
		cases = append(cases, Case{Name: fmt.Sprintf("all/window=300/%v", m), Shape: backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 200, Sk: 700, D: 64},
			Mask: m, Sigma: 1, Window: 300, Softcap: 20, Sinks: true})
	}
	for _, l := range []backend.Layout{backend.BHSD, backend.BSHD} {
		for _, m := range causal {
			cases = append(cases,
				Case{Name: fmt.Sprintf("all/gqa-chunk/%v/%v", m, l), Shape: backend.Shape{B: 1, Hq: 6, Hkv: 2, Sq: 7, Sk: 150, D: 128},
					Mask: m, Sigma: 2, Layout: l, Window: 64, Softcap: 10, Sinks: true},
				Case{Name: fmt.Sprintf("all/sq>sk/%v/%v", m, l), Shape: backend.Shape{B: 1, Hq: 4, Hkv: 1, Sq: 90, Sk: 70, D: 64},
					Mask: m, Sigma: 2, Layout: l, Window: 20, Softcap: 10, Sinks: true})
		}
	}
	return cases
}

// Cases returns the conformance table: every shape in every mask.
func Cases() []Case {
	shapes := []struct {
		name  string
		s     backend.Shape
		sigma float64
	}{
		{"tiny", backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 1, D: 16}, 1},
		{"small", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 64, Sk: 64, D: 64}, 1},
		{"odd", backend.Shape{B: 2, Hq: 3, Hkv: 3, Sq: 33, Sk: 77, D: 48}, 1},
		{"sq>sk", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 130, Sk: 5, D: 64}, 1},
		{"sq<sk", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 5, Sk: 130, D: 128}, 1},
		{"gqa", backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 40, Sk: 72, D: 64}, 1},
		{"gqa-decode", backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 1, Sk: 77, D: 64}, 1},
		{"gqa-chunk", backend.Shape{B: 1, Hq: 6, Hkv: 2, Sq: 7, Sk: 150, D: 128}, 1},
		{"mqa", backend.Shape{B: 1, Hq: 4, Hkv: 1, Sq: 65, Sk: 65, D: 128}, 1},
		{"d16", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 17, Sk: 31, D: 16}, 1},
		{"d32", backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 70, Sk: 70, D: 32}, 1},
		// In BSHD, two KV heads of 32 make rows of 64: a GPU kernel of head
		// dim 64 running D 32 must not read them as its own rows.
		{"d32-gqa", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 40, Sk: 130, D: 32}, 1},
		{"d80", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 19, Sk: 100, D: 80}, 1},
		{"d96", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 64, Sk: 64, D: 96}, 1},
		{"d160", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 70, Sk: 150, D: 160}, 1},
		{"d192", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 130, Sk: 140, D: 192}, 1},
		{"d256", backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 48, Sk: 96, D: 256}, 1},
		// Rows without a key (lower-right, Sq > Sk) at the head dims whose
		// GPU kernels tell them otherwise where no LSE is asked for.
		{"d128-sq>sk", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 150, Sk: 40, D: 128}, 1},
		{"d256-sq>sk", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 90, Sk: 20, D: 256}, 1},
		{"long-keys", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 64, Sk: 600, D: 64}, 1},
		// 129 to 256 keys at D 64: the Hopper kernel's one-tile form.
		{"short-keys", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 150, Sk: 200, D: 64}, 1},
		{"keys129", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 300, Sk: 129, D: 64}, 1},
		{"large-values", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 40, Sk: 50, D: 64}, 30},
		{"tiny-values", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 40, Sk: 50, D: 64}, 1e-3},
	}
	var cases []Case
	for _, sh := range shapes {
		for _, m := range []backend.Mask{backend.NoMask, backend.CausalUpperLeft, backend.CausalLowerRight} {
			cases = append(cases, Case{Name: fmt.Sprintf("%s/%v", sh.name, m), Shape: sh.s, Mask: m, Sigma: sh.sigma})
		}
	}
	for _, sh := range shapes {
		if sh.name == "odd" || sh.name == "gqa" || sh.name == "sq>sk" || sh.name == "mqa" || sh.name == "short-keys" || sh.name == "d32-gqa" {
			for _, m := range []backend.Mask{backend.NoMask, backend.CausalLowerRight} {
				cases = append(cases, Case{Name: fmt.Sprintf("bshd/%s/%v", sh.name, m), Shape: sh.s, Mask: m, Sigma: sh.sigma, Layout: backend.BSHD})
			}
		}
	}
	// Maxima that grow along the keys, over several of stage 9's tiles of
	// 128 keys (D 96, 128) and 64 keys (D 256). The float32 tiers hold a
	// rescale here; of the FP8 tensor cores' tiers, the worst case only a
	// gross error, and FP8MMARMSTolerance a rescale floored at 2^-4.
	for _, sh := range []namedShape{
		{"d96", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 64, Sk: 520, D: 96}},
		{"d128", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 130, Sk: 700, D: 128}},
		{"d256", backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 70, Sk: 400, D: 256}},
	} {
		for _, m := range []backend.Mask{backend.NoMask, backend.CausalLowerRight} {
			cases = append(cases, Case{Name: fmt.Sprintf("rising-keys/%s/%v", sh.name, m), Shape: sh.s, Mask: m, Sigma: 1, KeyRamp: 8})
		}
	}
	one := backend.Shape{B: 1, Hq: 2, Hkv: 1, Sq: 9, Sk: 40, D: 64}
	cases = append(cases,
		Case{Name: "scale=-0.3", Shape: one, Sigma: 1, Scale: -0.3},
		// scale·log2(e) overflows float32 on its own; the inputs keep the
		// scores (and, for FP8E4M3, scale times the Q and K descales) small.
		Case{Name: "scale=3e38", Shape: one, Mask: backend.CausalLowerRight, Sigma: 2e-19, Scale: 3e38},
		Case{Name: "scale=1e-30", Shape: one, Sigma: 1, Scale: 1e-30},
		Case{Name: "scale=1e-30,large-values", Shape: one, Sigma: 1e15, Scale: 1e-30})
	return append(cases, variantCases()...)
}

// Config says how a backend is held to the suite.
type Config struct {
	Backend   backend.Backend
	Precision backend.Precision
	// Tol gives the output tolerance for a problem (FP32Tolerance,
	// F16PTolerance, FP8MMATolerance).
	Tol func(p *backend.Problem) Tolerance
	// LSETol gives the LSE tolerance; nil means LSETolerance (scores in
	// float32).
	LSETol func(p *backend.Problem) Tolerance
	// RMSTol, where not nil, bounds the root-mean-square error of each
	// output too (FP8MMARMSTolerance): for a backend whose Tol is a worst
	// case far above its error.
	RMSTol func(p *backend.Problem) RMSTolerance
	// LoadedKeys states the backend's rule for NaN in V (package doc): the
	// number of keys 0..n-1 whose V rows are multiplied into query row i's
	// output, masked keys with weight exactly 0 included. nil means the
	// exact rule, VisibleKeys: only the keys a row sees.
	LoadedKeys func(s backend.Shape, m backend.Mask, i int) int
	// WithoutLSE runs every case a second time without an LSE (Problem.LSE
	// nil), on the same inputs, and requires the same output bits: for a
	// backend that computes less when no LSE is asked for.
	WithoutLSE bool
}

func (c Config) lseTol(p *backend.Problem) Tolerance {
	if c.LSETol != nil {
		return c.LSETol(p)
	}
	return LSETolerance(p)
}

func (c Config) loaded(s backend.Shape, m backend.Mask, i int) int {
	if c.LoadedKeys != nil {
		return c.LoadedKeys(s, m, i)
	}
	return s.VisibleKeys(m, i)
}

func (c Config) scale(cs Case) float32 {
	if cs.Scale != 0 {
		return cs.Scale
	}
	return float32(1 / math.Sqrt(float64(cs.Shape.D)))
}

// run builds the case's problem with fresh inputs, runs the backend, and
// returns the problem or an error; skipped reports an unsupported case.
func (c Config) run(cs Case, in Inputs) (p *backend.Problem, skipped bool, err error) {
	p, out, lse := NewProblemLayout(cs.Shape, in, c.scale(cs), cs.Mask, c.Precision, cs.Layout)
	p.Variants = backend.Variants{SlidingWindow: cs.Window, Softcap: cs.Softcap, Sinks: in.Sinks}
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	if err := c.Backend.Supports(p); err != nil {
		if !errors.Is(err, backend.ErrUnsupported) {
			return nil, false, fmt.Errorf("Supports returned an error not wrapping ErrUnsupported: %v", err)
		}
		return nil, true, nil
	}
	if err := c.Backend.Attention(p); err != nil {
		return nil, false, err
	}
	if err := out.Check("Out"); err != nil {
		return nil, false, err
	}
	if err := lse.Check("LSE"); err != nil {
		return nil, false, err
	}
	if c.WithoutLSE {
		if err := c.sameWithoutLSE(p); err != nil {
			return nil, false, err
		}
	}
	return p, false, nil
}

// sameWithoutLSE runs p again without an LSE, into a fresh guarded output,
// and compares the two outputs bit for bit (NaN with any payload matches
// NaN).
func (c Config) sameWithoutLSE(p *backend.Problem) error {
	q := *p
	out := NewGuarded(len(p.Out))
	q.Out, q.LSE = out.Data(), nil
	if err := c.Backend.Attention(&q); err != nil {
		return fmt.Errorf("without an LSE: %v", err)
	}
	if err := out.Check("Out without an LSE"); err != nil {
		return err
	}
	for i, x := range q.Out {
		y := p.Out[i]
		if math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
			return fmt.Errorf("without an LSE, Out[%d] = %g, with one %g", i, x, y)
		}
	}
	return nil
}

// check compares a finished problem with the float64 oracle.
func (c Config) check(p *backend.Problem) error {
	want, wantLSE := oracle.Naive(p)
	tol := c.Tol(p)
	st := Compare(p.Out, want, tol)
	if st.Beyond > 0 {
		i := st.FirstBad
		return fmt.Errorf("Out: %d of %d beyond tolerance (%s); max_err %.3g; first at %d: got %g want %g",
			st.Beyond, st.N, tol.Why, st.MaxErr, i, p.Out[i], want[i])
	}
	if c.RMSTol != nil {
		if err := c.RMSTol(p).Check(st); err != nil {
			return fmt.Errorf("Out: %w", err)
		}
	}
	ltol := c.lseTol(p)
	if st := Compare(p.LSE, wantLSE, ltol); st.Beyond > 0 {
		i := st.FirstBad
		return fmt.Errorf("LSE: %d of %d beyond tolerance (%s); first at %d: got %g want %g", st.Beyond, st.N, ltol.Why, i, p.LSE[i], wantLSE[i])
	}
	return nil
}

// TB is what Run needs of a test: *testing.T satisfies it (T is then
// *testing.T), so a test calls sdpatest.Run(t, cfg). Taking it as a type
// parameter keeps package testing out of programs that use the rest of this
// package (cmd/sdpabench).
type TB[T any] interface {
	Run(name string, f func(T)) bool
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
	Skipf(format string, args ...any)
}

// Run runs the conformance table and the properties on cfg's backend, each
// as a subtest, logs how many ran, and fails if none did (a backend that
// reports every case unsupported has not been tested).
func Run[T TB[T]](t T, cfg Config) {
	seed := Seed()
	t.Logf("%s %v: seed %d (set FP8ATTN_SEED to reproduce)", cfg.Backend.Name(), cfg.Precision, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5EED))
	all, ran := checks(cfg), 0
	for _, c := range all {
		t.Run(c.name, func(t T) {
			err := c.fn(rng)
			if errors.Is(err, errSkip) {
				t.Skipf("unsupported by %s", cfg.Backend.Name())
			}
			ran++
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("%s %v: %d of %d checks ran", cfg.Backend.Name(), cfg.Precision, ran, len(all))
	if ran == 0 {
		t.Fatalf("%s %v: every check was skipped as unsupported: nothing was tested", cfg.Backend.Name(), cfg.Precision)
	}
}

// ErrNothingRan is returned by Failures when every check was skipped.
var ErrNothingRan = errors.New("every check was skipped as unsupported: nothing was tested")

// Failures runs every check like Run and returns the failures (ErrNothingRan
// if every check was skipped), for callers without a *testing.T and for
// testing the suite itself.
func Failures(cfg Config, rng *rand.Rand) []error {
	var errs []error
	ran := 0
	for _, c := range checks(cfg) {
		err := c.fn(rng)
		if errors.Is(err, errSkip) {
			continue
		}
		ran++
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	if ran == 0 {
		errs = append(errs, fmt.Errorf("%s: %w", cfg.Backend.Name(), ErrNothingRan))
	}
	return errs
}

var errSkip = errors.New("unsupported")

type check struct {
	name string
	fn   func(rng *rand.Rand) error
}

func checks(cfg Config) []check {
	var cs []check
	for _, c := range Cases() {
		c := c
		cs = append(cs, check{c.Name, func(rng *rand.Rand) error {
			in := RandomInputs(rng, c.Shape, c.Sigma)
			RampKeys(in.K, c.Shape, c.KeyRamp)
			if c.Sinks {
				in.Sinks = RandomSinks(rng, c.Shape)
			}
			p, skipped, err := cfg.run(c, in)
			if skipped {
				return errSkip
			}
			if err != nil {
				return err
			}
			return cfg.check(p)
		}})
	}
	return append(cs,
		check{"nan-propagation", func(rng *rand.Rand) error { return testNaN(cfg, rng) }},
		check{"nan-propagation-variants", func(rng *rand.Rand) error { return testNaNVariants(cfg, rng) }},
		check{"sinks-scale-by-lse", func(rng *rand.Rand) error { return testSinkLSE(cfg, rng) }},
		check{"permuted-keys", func(rng *rand.Rand) error { return testPermutation(cfg, rng) }},
		check{"gqa-equals-repeated-heads", func(rng *rand.Rand) error { return testGQA(cfg, rng) }},
		check{"layouts-agree", func(rng *rand.Rand) error { return testLayouts(cfg, rng) }})
}

// testNaN checks the NaN rule (package doc): NaN in one Q element of head
// 0, in one K element of KV head 0 (read by query heads 0 and 1) and in one
// V element of KV head 1 (query heads 2 and 3), under the lower-right causal
// mask with Sq > Sk, so that rows 0-9 see no key and must stay 0.
func testNaN(cfg Config, rng *rand.Rand) error {
	// Also in BSHD at D 32 with two KV heads, whose rows lie side by side:
	// a GPU kernel that runs D 32 on its D 64 kernel must read zeros past a
	// row, not the other head's codes (0·NaN is NaN). Its NaN key is among
	// the first 60, inside every kernel's first key tile, where a kernel
	// that took the heads' rows for its own would read it. And at D 128,
	// where the Hopper kernel tells rows without keys otherwise without an
	// LSE. The test is skipped where the backend does not support the
	// first shape; a later shape it does not support is passed over.
	for i, c := range []struct {
		s    backend.Shape
		l    backend.Layout
		keys int // the NaN key of K is drawn from 10 .. keys-1
	}{
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 100, Sk: 90, D: 64}, backend.BHSD, 90},
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 100, Sk: 90, D: 32}, backend.BSHD, 60},
		{backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 100, Sk: 90, D: 128}, backend.BHSD, 90},
	} {
		skipped, err := testNaNIn(cfg, rng, c.s, c.l, c.keys)
		if err != nil {
			return fmt.Errorf("D %d %v: %w", c.s.D, c.l, err)
		}
		if skipped && i == 0 {
			return errSkip
		}
	}
	return nil
}

// testNaNIn is testNaN's check of one shape and layout, with K's NaN at a
// key from 10 to keys-1; it reports whether the backend does not support
// the shape.
func testNaNIn(cfg Config, rng *rand.Rand, s backend.Shape, l backend.Layout, keys int) (skipped bool, err error) {
	const m = backend.CausalLowerRight
	in := RandomInputs(rng, s, 1)
	nan := float32(math.NaN())
	qRow, kRow, vRow, vCol := rng.IntN(s.Sq), 10+rng.IntN(keys-10), 10+rng.IntN(80), rng.IntN(s.D)
	in.Q[qRow*s.D+rng.IntN(s.D)] = nan // query head 0, row qRow
	in.K[kRow*s.D+rng.IntN(s.D)] = nan // KV head 0, key kRow
	in.V[(s.Sk+vRow)*s.D+vCol] = nan   // KV head 1, key vRow, column vCol
	p, skipped, err := cfg.run(Case{Shape: s, Mask: m, Layout: l}, in)
	if skipped || err != nil {
		return skipped, err
	}
	for h := 0; h < s.Hq; h++ {
		for i := 0; i < s.Sq; i++ {
			sees := s.VisibleKeys(m, i)
			rowNaN := h == 0 && i == qRow && sees > 0 || h < 2 && sees > kRow
			colNaN := h >= 2 && sees > 0 && cfg.loaded(s, m, i) > vRow
			row := l.Offset(0, h, i, s.Hq, s.Sq, s.D)
			for d := 0; d < s.D; d++ {
				want := rowNaN || colNaN && d == vCol
				if got := p.Out[row+d]; math.IsNaN(float64(got)) != want {
					return false, fmt.Errorf("head %d row %d column %d: output %g, want NaN=%v (NaN at Q row %d, K key %d, V key %d column %d)",
						h, i, d, got, want, qRow, kRow, vRow, vCol)
				}
			}
		}
	}
	return false, nil
}

// testPermutation: without a mask, permuting keys and values together
// leaves the output unchanged.
func testPermutation(cfg Config, rng *rand.Rand) error {
	s := backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 20, Sk: 67, D: 64}
	in := RandomInputs(rng, s, 1)
	p1, skipped, err := cfg.run(Case{Shape: s}, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	perm := rng.Perm(s.Sk)
	pin := Inputs{Q: in.Q, K: make([]float32, len(in.K)), V: make([]float32, len(in.V))}
	for h := 0; h < s.Hkv; h++ {
		for j, pj := range perm {
			dst, src := (h*s.Sk+j)*s.D, (h*s.Sk+pj)*s.D
			copy(pin.K[dst:dst+s.D], in.K[src:src+s.D])
			copy(pin.V[dst:dst+s.D], in.V[src:src+s.D])
		}
	}
	p2, _, err := cfg.run(Case{Shape: s}, pin)
	if err != nil {
		return err
	}
	if st := Compare(p2.Out, p1.Out, cfg.Tol(p1)); st.Beyond > 0 {
		return fmt.Errorf("permuting keys changed %d outputs (max %.3g)", st.Beyond, st.MaxErr)
	}
	return nil
}

// testGQA: grouped-query attention equals ordinary attention with each KV
// head repeated for its group of query heads.
func testGQA(cfg Config, rng *rand.Rand) error {
	s := backend.Shape{B: 2, Hq: 6, Hkv: 2, Sq: 21, Sk: 45, D: 64}
	in := RandomInputs(rng, s, 1)
	p1, skipped, err := cfg.run(Case{Shape: s, Mask: backend.CausalLowerRight}, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	rs := s
	rs.Hkv = s.Hq
	rep := Inputs{Q: in.Q, K: make([]float32, 0, len(in.K)*3), V: make([]float32, 0, len(in.V)*3)}
	n := s.Sk * s.D
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.Hq; h++ {
			src := (b*s.Hkv + h/s.Group()) * n
			rep.K = append(rep.K, in.K[src:src+n]...)
			rep.V = append(rep.V, in.V[src:src+n]...)
		}
	}
	p2, _, err := cfg.run(Case{Shape: rs, Mask: backend.CausalLowerRight}, rep)
	if err != nil {
		return err
	}
	if st := Compare(p2.Out, p1.Out, cfg.Tol(p1)); st.Beyond > 0 {
		return fmt.Errorf("GQA differs from repeated heads on %d outputs (max %.3g)", st.Beyond, st.MaxErr)
	}
	return nil
}

// testLayouts: the same inputs in [B][H][S][D] and in [B][S][H][D] give the
// same output (in the other order) and the same LSE.
func testLayouts(cfg Config, rng *rand.Rand) error {
	s := backend.Shape{B: 2, Hq: 4, Hkv: 2, Sq: 21, Sk: 45, D: 64}
	in := RandomInputs(rng, s, 1)
	c := Case{Shape: s, Mask: backend.CausalLowerRight}
	p1, skipped, err := cfg.run(c, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	c.Layout = backend.BSHD
	p2, skipped, err := cfg.run(c, in)
	if skipped {
		return errSkip
	}
	if err != nil {
		return err
	}
	tol := cfg.Tol(p1)
	if st := Compare(p2.Out, layout.Permute(p1.Out, s.B, s.Hq, s.Sq, s.D, backend.BSHD), tol); st.Beyond > 0 {
		return fmt.Errorf("bshd output differs from bhsd on %d elements (max %.3g)", st.Beyond, st.MaxErr)
	}
	if st := Compare(p2.LSE, p1.LSE, cfg.lseTol(p1)); st.Beyond > 0 {
		return fmt.Errorf("bshd LSE differs from bhsd on %d rows", st.Beyond)
	}
	return nil
}
