package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestPV4Strided holds every kernel set's pv4Strided to its own pv4 bit
// for bit where the weights fit a panel (the same rows laid out a panel
// apart), and to pv4StridedGo within the summation bound for any count of
// keys, for random head dims, counts, strides and alphas (1 and 0 among
// them), with guard regions around every slice.
func TestPV4Strided(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 63))
	normal := func(int) float32 { return float32(rng.NormFloat64()) }
	weight := func(int) float32 { return float32(rng.Float64()) }
	dims := []int{1, 3, 8, 15, 16, 24, 40, 64, 72, 128, 136, 256}
	tested := 0
	for _, ks := range kernelSets {
		if ks.pv4Strided == nil {
			continue
		}
		tested++
		t.Run(ks.name, func(t *testing.T) {
			for trial := range 300 {
				d := dims[rng.IntN(len(dims))]
				n := rng.IntN(3*panel + 1)
				if trial%3 == 0 {
					n = rng.IntN(panel + 1)
				}
				stride := max(1, n) + rng.IntN(2*panel)
				if trial%5 == 0 {
					stride = panel + rng.IntN(2)*rng.IntN(panel)
					n = min(n, panel)
				}
				p, pok := guarded(rng, 3*stride+n, weight)
				v, vok := guarded(rng, n*d, normal)
				acc, accok := guarded(rng, 4*d, normal)
				alpha := [4]float32{float32(rng.Float64()), 1, 0, float32(rng.Float64())}
				if trial%2 == 1 {
					alpha = [4]float32{1, 1, 1, 1}
				}
				old := append([]float32(nil), acc...)
				want := append([]float32(nil), acc...)
				pv4StridedGo(want, p, v, d, n, stride, &alpha)
				ks.pv4Strided(acc, p, v, d, n, stride, &alpha)
				for _, ok := range []func() error{pok, vok, accok} {
					if err := ok(); err != nil {
						t.Fatalf("d=%d n=%d stride %d: %v", d, n, stride, err)
					}
				}
				if r, c, ok := pv4Within(acc, want, old, p, v, d, n, stride, &alpha); !ok {
					t.Fatalf("d=%d n=%d stride %d: acc[%d][%d] = %v, want %v", d, n, stride, r, c, acc[r*d+c], want[r*d+c])
				}
				if n > panel {
					continue
				}
				tile := make([]float32, 4*panel)
				for r := range 4 {
					copy(tile[r*panel:r*panel+n], p[r*stride:r*stride+n])
				}
				same := append([]float32(nil), old...)
				ks.pv4(same, tile, v, d, n, &alpha)
				for i, x := range same {
					if math.Float32bits(acc[i]) != math.Float32bits(x) {
						t.Fatalf("d=%d n=%d stride %d: acc[%d][%d] = %v, pv4 on a panel's rows %v", d, n, stride, i/d, i%d, acc[i], x)
					}
				}
			}
		})
	}
	if tested == 0 {
		t.Skip("no kernel set on this CPU has pv4Strided")
	}
}
