package sdpatest_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// mutant wraps the reference backend with one deliberate bug.
type mutant struct {
	name string
	run  func(p *backend.Problem) error
}

func (m mutant) Name() string                       { return m.name }
func (mutant) Supports(*backend.Problem) error      { return nil }
func (m mutant) Attention(p *backend.Problem) error { return m.run(p) }

// TestSuiteCatchesBugs: the suite must fail each of these broken backends.
func TestSuiteCatchesBugs(t *testing.T) {
	ref := oracle.Reference{}
	mutants := []mutant{
		{"skips-last-element", func(p *backend.Problem) error {
			keep := p.Out[len(p.Out)-1]
			ref.Attention(p)
			p.Out[len(p.Out)-1] = keep
			return nil
		}},
		{"wrong-causal-alignment", func(p *backend.Problem) error {
			c := *p
			if c.Mask == backend.CausalLowerRight {
				c.Mask = backend.CausalUpperLeft
			}
			return ref.Attention(&c)
		}},
		{"gqa-modulo", func(p *backend.Problem) error {
			// Query head h reads KV head h % Hkv instead of h / group.
			c := *p
			c.Hkv = c.Hq
			if p.Precision != backend.FP32 || p.Hkv == p.Hq {
				return ref.Attention(p)
			}
			n := p.Sk * p.D
			c.K, c.V = make([]float32, 0, p.B*p.Hq*n), make([]float32, 0, p.B*p.Hq*n)
			for b := 0; b < p.B; b++ {
				for h := 0; h < p.Hq; h++ {
					src := (b*p.Hkv + h%p.Hkv) * n
					c.K, c.V = append(c.K, p.K[src:src+n]...), append(c.V, p.V[src:src+n]...)
				}
			}
			return ref.Attention(&c)
		}},
		{"writes-past-end", func(p *backend.Problem) error {
			ref.Attention(p)
			full := p.Out[:cap(p.Out)]
			full[len(p.Out)] = 0
			return nil
		}},
		{"loses-nan", func(p *backend.Problem) error {
			ref.Attention(p)
			for i, x := range p.Out {
				if x != x {
					p.Out[i] = 0
				}
			}
			return nil
		}},
		{"slightly-off", func(p *backend.Problem) error {
			ref.Attention(p)
			p.Out[len(p.Out)/2] *= 1.001
			return nil
		}},
	}
	mutants = append(mutants,
		mutant{"lse-0.3%-high", func(p *backend.Problem) error {
			err := ref.Attention(p)
			for i := range p.LSE {
				p.LSE[i] *= 1.003
			}
			return err
		}},
		mutant{"score-scale-in-float32", func(p *backend.Problem) error {
			// scale·log2(e) rounded to float32 before the descales are
			// applied, as the GPU kernels did: Inf for scale 3e38.
			c := *p
			c.Scale = float32(float64(float32(float64(p.Scale)*math.Log2E)) / math.Log2E)
			return ref.Attention(&c)
		}},
		mutant{"v-nan-dense", func(p *backend.Problem) error {
			// P·V over every key of the head, as a dense product: a NaN in
			// V spreads to every row of the head that sees any key.
			err := ref.Attention(p)
			for bh := 0; bh < p.B*p.Hq; bh++ {
				b, h := bh/p.Hq, bh%p.Hq
				for d := 0; d < p.D; d++ {
					nan := false
					for j := 0; j < p.Sk; j++ {
						x := p.V[p.Layout.Offset(b, h/p.Group(), j, p.Hkv, p.Sk, p.D)+d]
						nan = nan || x != x
					}
					for i := 0; nan && i < p.Sq; i++ {
						if lo, hi := p.KeyRange(i); lo < hi {
							p.Out[p.Layout.Offset(b, h, i, p.Hq, p.Sq, p.D)+d] = float32(math.NaN())
						}
					}
				}
			}
			return err
		}},
	)
	mutants = append(mutants, variantMutants()...)
	mutants = append(mutants, mutant{"v-nan-into-empty-rows", func(p *backend.Problem) error {
		// A row that sees no key multiplies its zero weights by V.
		err := ref.Attention(p)
		for bh := 0; bh < p.B*p.Hq; bh++ {
			b, h := bh/p.Hq, bh%p.Hq
			for j := 0; j < p.Sk*p.D; j++ {
				if x := p.V[p.Layout.Offset(b, h/p.Group(), j/p.D, p.Hkv, p.Sk, p.D)+j%p.D]; x != x {
					for i := 0; i < p.Sq; i++ {
						if p.VisibleKeys(p.Mask, i) == 0 {
							p.Out[p.Layout.Offset(b, h, i, p.Hq, p.Sq, p.D)+j%p.D] = x
						}
					}
				}
			}
		}
		return err
	}})
	for _, m := range mutants {
		cfg := sdpatest.Config{Backend: m, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance}
		failed := sdpatest.Failures(cfg, rand.New(rand.NewPCG(sdpatest.Seed(), 1)))
		if len(failed) == 0 {
			t.Errorf("suite passed the broken backend %q", m.name)
		} else {
			t.Logf("%s: caught by %d checks, e.g. %v", m.name, len(failed), failed[0])
		}
	}
	if f := sdpatest.Failures(sdpatest.Config{Backend: ref, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance},
		rand.New(rand.NewPCG(sdpatest.Seed(), 2))); len(f) != 0 {
		t.Errorf("suite fails the reference itself: %v", f)
	}
	// A backend that declines every case has not been tested.
	f := sdpatest.Failures(sdpatest.Config{Backend: declines{}, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance},
		rand.New(rand.NewPCG(sdpatest.Seed(), 3)))
	if len(f) != 1 || !errors.Is(f[0], sdpatest.ErrNothingRan) {
		t.Errorf("suite passed a backend that skips everything: %v", f)
	}
	// The dense-P·V mutant passes when its rule is declared: LoadedKeys
	// states which keys each row multiplies (here all of them).
	dense := mutants[len(mutants)-2-len(variantMutants())]
	if dense.name != "v-nan-dense" {
		t.Fatalf("the dense mutant is %q", dense.name)
	}
	cfg := sdpatest.Config{Backend: dense, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance,
		LoadedKeys: func(s backend.Shape, _ backend.Mask, _ int) int { return s.Sk }}
	if f := sdpatest.Failures(cfg, rand.New(rand.NewPCG(sdpatest.Seed(), 4))); len(f) != 0 {
		t.Errorf("declared dense rule: %v", f)
	}
}

// declines is a backend that supports nothing.
type declines struct{}

func (declines) Name() string { return "declines" }
func (declines) Supports(*backend.Problem) error {
	return fmt.Errorf("%w: nothing", backend.ErrUnsupported)
}
func (declines) Attention(*backend.Problem) error { return nil }

// pagedMutant wraps the cpu backend's paged cache with one deliberate bug.
type pagedMutant struct {
	attend func(kv backend.PagedKV, p *backend.PagedProblem) error
	app    func(kv backend.PagedKV, a *backend.PagedAppend) error
	// copyPage replaces CopyPage.
	copyPage func(kv backend.PagedKV, dst, src int) error
}

func (k mutantKV) CopyPage(dst, src int) error {
	if k.m.copyPage != nil {
		return k.m.copyPage(k.PagedKV, dst, src)
	}
	return k.PagedKV.CopyPage(dst, src)
}

func (m pagedMutant) NewPagedKV(c backend.PagedConfig) (backend.PagedKV, error) {
	kv, err := cpu.New(2).NewPagedKV(c)
	return mutantKV{variantsKV{kv}, m}, err
}

type mutantKV struct {
	backend.PagedKV
	m pagedMutant
}

func (k mutantKV) Attention(p *backend.PagedProblem) error {
	if k.m.attend != nil {
		return k.m.attend(k.PagedKV, p)
	}
	return k.PagedKV.Attention(p)
}

func (k mutantKV) Append(a *backend.PagedAppend) error {
	if k.m.app != nil {
		return k.m.app(k.PagedKV, a)
	}
	return k.PagedKV.Append(a)
}

// TestPagedSuiteCatchesBugs: the paged table must fail each of these
// broken caches, and pass the cache they break.
func TestPagedSuiteCatchesBugs(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 77))
	if errs := sdpatest.PagedFailures(pagedMutant{}, rng); len(errs) > 0 {
		t.Fatalf("the unbroken cache fails: %v", errs)
	}
	for name, m := range map[string]pagedMutant{
		"reads-another-sequence's-page": {attend: func(kv backend.PagedKV, p *backend.PagedProblem) error {
			if p.B > 1 && p.SeqLens[0] > 0 && p.SeqLens[1] > 0 {
				p.BlockTable[0] = p.BlockTable[p.PagesPerSeq]
			}
			return kv.Attention(p)
		}},
		"drops-the-last-token": {attend: func(kv backend.PagedKV, p *backend.PagedProblem) error {
			if p.SeqLens[0] > 1 {
				p.SeqLens[0]--
				defer func() { p.SeqLens[0]++ }()
			}
			return kv.Attention(p)
		}},
		"window-one-key-wider": {attend: func(kv backend.PagedKV, p *backend.PagedProblem) error {
			if p.SlidingWindow > 0 {
				p.SlidingWindow++
				defer func() { p.SlidingWindow-- }()
			}
			return kv.Attention(p)
		}},
		"sink-counted-twice": {attend: func(kv backend.PagedKV, p *backend.PagedProblem) error {
			if p.Sinks != nil {
				old := p.Sinks
				p.Sinks = slices.Clone(old)
				for h := range p.Sinks {
					p.Sinks[h] += math.Ln2
				}
				defer func() { p.Sinks = old }()
			}
			return kv.Attention(p)
		}},
		"softcap-ignored": {attend: func(kv backend.PagedKV, p *backend.PagedProblem) error {
			c := *p
			c.Softcap = 0
			return kv.Attention(&c)
		}},
		"copy-page-from-another-page": {copyPage: func(kv backend.PagedKV, dst, src int) error {
			if other := (src + 1) % kv.Config().Pages; other != dst {
				src = other
			}
			return kv.CopyPage(dst, src)
		}},
		"copy-page-does-nothing": {copyPage: func(kv backend.PagedKV, dst, src int) error {
			if dst == src || dst < 0 || src < 0 || dst >= kv.Config().Pages || src >= kv.Config().Pages {
				return kv.CopyPage(dst, src)
			}
			return nil
		}},
		"copy-page-backwards": {copyPage: func(kv backend.PagedKV, dst, src int) error { return kv.CopyPage(src, dst) }},
		"saturates-instead-of-growing": {app: func(kv backend.PagedKV, a *backend.PagedAppend) error {
			c := *a
			c.K, c.V = slices.Clone(a.K), slices.Clone(a.V)
			for _, x := range [][]float32{c.K, c.V} {
				for i := range x {
					x[i] = max(-8, min(8, x[i]))
				}
			}
			return kv.Append(&c)
		}},
	} {
		if errs := sdpatest.PagedFailures(m, rng); len(errs) == 0 {
			t.Errorf("%s passed the paged table", name)
		} else {
			t.Logf("%s: %d cases fail, first: %v", name, len(errs), errs[0])
		}
	}
}

// TestSuiteWithoutLSE: Config.WithoutLSE fails a backend whose output
// changes by one ulp when no LSE is asked for, which the suite passes
// without it, and passes the reference.
func TestSuiteWithoutLSE(t *testing.T) {
	ref := oracle.Reference{}
	differs := mutant{"differs-without-lse", func(p *backend.Problem) error {
		err := ref.Attention(p)
		if p.LSE == nil {
			i := len(p.Out) / 2
			p.Out[i] = math.Nextafter32(p.Out[i], float32(math.Inf(1)))
		}
		return err
	}}
	seed := sdpatest.Seed()
	for _, c := range []struct {
		be         backend.Backend
		withoutLSE bool
		fails      bool
	}{{differs, true, true}, {differs, false, false}, {ref, true, false}} {
		cfg := sdpatest.Config{Backend: c.be, Precision: backend.FP32, Tol: sdpatest.FP32Tolerance, WithoutLSE: c.withoutLSE}
		f := sdpatest.Failures(cfg, rand.New(rand.NewPCG(seed, 5)))
		if (len(f) > 0) != c.fails {
			t.Errorf("%s, WithoutLSE %v: %d failures, want failures %v: %v", c.be.Name(), c.withoutLSE, len(f), c.fails, f)
		} else if len(f) > 0 {
			t.Logf("%s: caught by %d checks, e.g. %v", c.be.Name(), len(f), f[0])
		}
	}
}
