package sdpatest_test

import (
	"math"
	"slices"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// variantMutants break the attention variants of the reference backend,
// each as a backend would by mistake; the suite must fail every one.
func variantMutants() []mutant {
	ref := oracle.Reference{}
	return []mutant{
		{"window-one-key-wider", func(p *backend.Problem) error {
			c := *p
			if c.SlidingWindow > 0 {
				c.SlidingWindow++
			}
			return ref.Attention(&c)
		}},
		{"window-ignored", func(p *backend.Problem) error {
			c := *p
			c.SlidingWindow = 0
			return ref.Attention(&c)
		}},
		{"sink-counted-twice", func(p *backend.Problem) error {
			c := *p
			if p.Sinks != nil {
				c.Sinks = slices.Clone(p.Sinks)
				for h := range c.Sinks {
					c.Sinks[h] += math.Ln2
				}
			}
			return ref.Attention(&c)
		}},
		{"sinks-ignored", func(p *backend.Problem) error {
			c := *p
			c.Sinks = nil
			return ref.Attention(&c)
		}},
		{"lse-includes-the-sink", func(p *backend.Problem) error {
			err := ref.Attention(p)
			for r := range p.LSE {
				if s := p.Sink(r / p.Sq % p.Hq); !math.IsInf(s, -1) {
					p.LSE[r] = float32(math.Log(math.Exp(float64(p.LSE[r])) + math.Exp(s)))
				}
			}
			return err
		}},
		{"softcap-ignored", func(p *backend.Problem) error {
			c := *p
			c.Softcap = 0
			return ref.Attention(&c)
		}},
		{"softcap-after-the-mask", softcapAfterMask},
	}
}

// softcapAfterMask is attention that applies the softcap to the masked
// scores: a masked key's -Inf becomes -c, so every key of the row gets a
// weight of at least e^-c relative to the others (FP32 problems in BHSD;
// others go to the reference unchanged, which the FP32 suite does not run).
func softcapAfterMask(p *backend.Problem) error {
	if p.Softcap == 0 || p.Precision != backend.FP32 || p.Layout != backend.BHSD {
		return oracle.Reference{}.Attention(p)
	}
	c, D := float64(p.Softcap), p.D
	s := make([]float64, p.Sk)
	for b := range p.B {
		for h := range p.Hq {
			kvh := b*p.Hkv + h/p.Group()
			for i := range p.Sq {
				r := (b*p.Hq+h)*p.Sq + i
				lo, hi := p.KeyRange(i)
				m := math.Inf(-1)
				for j := range p.Sk {
					s[j] = math.Inf(-1)
					if j >= lo && j < hi {
						var dot float64
						for d := range D {
							dot += float64(p.Q[r*D+d]) * float64(p.K[(kvh*p.Sk+j)*D+d])
						}
						s[j] = dot * float64(p.Scale)
					}
					s[j] = c * math.Tanh(s[j]/c)
					m = max(m, s[j])
				}
				var l float64
				for j := range p.Sk {
					s[j] = math.Exp(s[j] - m)
					l += s[j]
				}
				den := l + math.Exp(p.Sink(h)-m)
				for d := range D {
					var o float64
					for j := range p.Sk {
						o += s[j] * float64(p.V[(kvh*p.Sk+j)*D+d])
					}
					p.Out[r*D+d] = float32(o / den)
				}
				p.LSE[r] = float32(m + math.Log(l))
			}
		}
	}
	return nil
}

// variantsKV is a paged storage that computes problems with variants by
// the reference, on the sequences read back from the storage (and the
// others by the storage itself): the correct cache the paged mutants
// break.
type variantsKV struct{ backend.PagedKV }

func (k variantsKV) Attention(p *backend.PagedProblem) error {
	if !p.Variants.Any() {
		return k.PagedKV.Attention(p)
	}
	c := k.Config()
	if err := p.Validate(c); err != nil {
		return err
	}
	D := p.D
	for b := range p.B {
		sq := p.Queries(b)
		if sq == 0 {
			continue
		}
		var dp *backend.Problem
		if p.SeqLens[b] > 0 {
			var err error
			if dp, err = sdpatest.PagedSequence(k.PagedKV.(backend.PagedReader), p, c, b); err != nil {
				return err
			}
			dp.LSE = make([]float32, p.Hq*sq)
			if err := (oracle.Reference{}).Attention(dp); err != nil {
				return err
			}
		}
		for h := range p.Hq {
			for i := range sq {
				o := p.QOffset(b, h, i)
				if dp == nil {
					clear(p.Out[o : o+D])
					p.LSE[p.LSEIndex(b, h, i)] = float32(math.Inf(-1))
					continue
				}
				copy(p.Out[o:o+D], dp.Out[(h*sq+i)*D:])
				p.LSE[p.LSEIndex(b, h, i)] = dp.LSE[h*sq+i]
			}
		}
	}
	return nil
}
