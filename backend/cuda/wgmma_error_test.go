//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/fp8mma"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestWGMMAScoreError holds Hopper's FP8 tensor cores to fp8mma.ErrorBound,
// score by score: stage 9 runs heads of one query and one key (so that each
// LSE is the score itself, the dot product of the codes times the score
// factor), and every score's error against the exact dot product must be
// within the bound plus the float32 roundings of the factor and the LSE.
// It logs how far below the bound the scores fall, and how many are off the
// exact product by more than float32 roundings (the truncation the bound is
// for: the test fails if none is, as it would on exact hardware, where the
// bound would be unneeded). The inputs: N(0,1), and values scaled by
// 2^U(-8,8) element by element (E4M3 subnormals and exponents far apart),
// at D = 64, 128 and 256.
func TestWGMMAScoreError(t *testing.T) {
	if !runnable(t, tiles.HopperStage) {
		t.Skip("no Hopper GPU")
	}
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 0x3a3a))
	be := testBackend(tiles.HopperStage)
	for _, d := range []int{64, 128, 256} {
		for _, spread := range []bool{false, true} {
			s := backend.Shape{B: 1, Hq: 2048, Hkv: 2048, Sq: 1, Sk: 1, D: d}
			in := sdpatest.RandomInputs(rng, s, 1)
			if spread {
				for _, x := range [][]float32{in.Q, in.K} {
					for i := range x {
						x[i] *= float32(math.Exp2(16*rng.Float64() - 8))
					}
				}
			}
			scale := float32(1 / math.Sqrt(float64(d)))
			p, _, _ := sdpatest.NewProblem(s, in, scale, backend.NoMask, backend.FP8E4M3)
			if err := be.Attention(p); err != nil {
				t.Fatal(err)
			}
			truncated, beyond, beyondStep, worst := 0, 0, 0, 0.0
			for h := 0; h < s.Hq; h++ {
				q, k := p.Q8[h*d:(h+1)*d], p.K8[h*d:(h+1)*d]
				factor := float64(p.Scale) * float64(p.QScale[h]) * float64(p.KScale[h])
				exact, bound := fp8mma.ExactDot(q, k), fp8mma.ErrorBound(q, k)
				got := float64(p.LSE[h]) / factor // the hardware's dot product, to float32 roundings
				slack := 16 * eps32 * math.Abs(got)
				errAbs := math.Abs(got - exact)
				if errAbs > slack {
					truncated++
				}
				if bound > 0 {
					worst = max(worst, errAbs/bound)
				}
				if errAbs > bound/fp8mma.StepTruncations+slack {
					beyondStep++ // beyond one truncation a step
				}
				if !(errAbs <= bound+slack) {
					beyond++
					if beyond <= 5 {
						t.Errorf("D %d spread %v head %d: LSE %v is dot product %v; exact %v, error %v beyond the bound %v",
							d, spread, h, p.LSE[h], got, exact, errAbs, bound)
					}
				}
			}
			t.Logf("D %d spread %v: %d scores, %d off the exact dot product by more than float32 roundings, %d beyond one truncation a step, %d beyond the bound; largest error %.4f of its bound",
				d, spread, s.Hq, truncated, beyondStep, beyond, worst)
			if truncated == 0 {
				t.Errorf("D %d spread %v: no score shows the truncation", d, spread)
			}
		}
	}
}

const eps32 = 1.0 / (1 << 23)
