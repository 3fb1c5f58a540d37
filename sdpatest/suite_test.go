package sdpatest_test

import (
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
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
}
