package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestScoresKeys4 holds every kernel set's scoresKeys4 to its own scores4,
// bit for bit, on the keys [lo, hi) asked for, for random ranges (each
// vector boundary among them) and head dims: the columns outside the set's
// vectors that hold [lo, hi) must keep the poison written before, and
// nothing outside s may be written.
func TestScoresKeys4(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 62))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	const poison = 0x7fa5a5a5
	dims := []int{1, 3, 8, 16, 40, 64, 128, 256}
	tested := 0
	for _, ks := range kernelSets {
		if ks.scoresKeys4 == nil {
			continue
		}
		tested++
		t.Run(ks.name, func(t *testing.T) {
			for trial := range 300 {
				d := dims[rng.IntN(len(dims))]
				lo := rng.IntN(panel)
				hi := lo + 1 + rng.IntN(panel-lo)
				if trial%4 == 0 { // a range on vector boundaries
					lo, hi = 16*rng.IntN(4), 16*(1+rng.IntN(4))
					if hi <= lo {
						lo, hi = hi-16, lo+16
					}
				}
				q := make([]float32, 4*d)
				kt := make([]float32, d*panel)
				for i := range q {
					q[i] = normal(i)
				}
				for i := range kt {
					kt[i] = normal(i)
				}
				scale := float32(rng.Float64() + 0.1)
				want := make([]float32, 4*panel)
				ks.scores4(want, q, kt, d, scale)
				s, ok := guarded(rng, 4*panel, func(int) float32 { return math.Float32frombits(poison) })
				ks.scoresKeys4(s, q, kt, d, scale, lo, hi)
				if err := ok(); err != nil {
					t.Fatalf("d=%d keys [%d, %d): %v", d, lo, hi, err)
				}
				v0, v1 := lo/16*16, (hi+15)/16*16 // the AVX2 and NEON sets' vectors of keys
				for r := range 4 {
					for j := range panel {
						got := math.Float32bits(s[r*panel+j])
						switch {
						case j >= lo && j < hi && got != math.Float32bits(want[r*panel+j]):
							t.Fatalf("d=%d keys [%d, %d): s[%d][%d] = %v, want %v", d, lo, hi, r, j, s[r*panel+j], want[r*panel+j])
						case (j < v0 || j >= v1) && got != poison:
							t.Fatalf("d=%d keys [%d, %d): s[%d][%d] = %v written, outside the keys' vectors [%d, %d)", d, lo, hi, r, j, s[r*panel+j], v0, v1)
						}
					}
				}
			}
		})
	}
	if tested == 0 {
		t.Skip("no kernel set on this CPU has scoresKeys4")
	}
}
