package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestSoftcapKernel holds every kernel set's softcap kernel to softcapGo
// with the set's own exponential, bit for bit, on rows of every length up
// to a few vectors past a group's 256 scores, in guarded slices: scores of
// every magnitude against caps from 1e-3 to 3e4, with zeros of both signs,
// infinities, NaNs, subnormals and scores about the exponential's cut-off
// (|x|·2/c near 87.3, where e^(-2|y|) becomes 0). A NaN score must stay NaN
// and ±Inf must become ±c (times log2e in a base2 set), whatever the
// reference says.
func TestSoftcapKernel(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 61))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -0x1p-140}
	tested := 0
	for _, ks := range kernelSets {
		if ks.softcap == nil {
			continue
		}
		tested++
		t.Run(ks.name, func(t *testing.T) {
			k := float32(1)
			if ks.base2 {
				k = math.Log2E
			}
			for trial := range 400 {
				c := []float32{50, 1, 1e-3, 3e4, 30}[trial%5]
				m2, ck := -2/c, c*k
				n := 1 + rng.IntN(4*panel+24)
				if trial%7 == 0 {
					n = 4 * panel
				}
				mag := float32(math.Pow(10, rng.Float64()*6-3)) * c
				fill := func(int) float32 {
					switch rng.IntN(8) {
					case 0:
						return specials[rng.IntN(len(specials))]
					case 1: // about the cut-off: |x|·2/c within 1% of 87.33654
						return float32(43.66827*(0.99+0.02*rng.Float64())) * c * float32(1-2*rng.IntN(2))
					}
					return float32(rng.NormFloat64()) * mag
				}
				row, ok := guarded(rng, n, fill)
				want := append([]float32(nil), row...)
				softcapGo(ks.expSum, want, m2, ck, make([]float32, n))
				in := append([]float32(nil), row...)
				ks.softcap(row, m2, ck)
				if err := ok(); err != nil {
					t.Fatalf("c=%v n=%d: %v", c, n, err)
				}
				for j, x := range row {
					if math.Float32bits(x) != math.Float32bits(want[j]) {
						t.Fatalf("c=%v n=%d: softcap(%v) = %v (%#x), want %v (%#x)", c, n, in[j], x, math.Float32bits(x), want[j], math.Float32bits(want[j]))
					}
					switch v := in[j]; {
					case v != v && x == x:
						t.Fatalf("c=%v n=%d: softcap(NaN) = %v", c, n, x)
					case math.IsInf(float64(v), 0) && x != float32(math.Copysign(float64(ck), float64(v))):
						t.Fatalf("c=%v n=%d: softcap(%v) = %v, want ±%v", c, n, v, x, ck)
					}
				}
			}
		})
	}
	if tested == 0 {
		t.Skip("no kernel set on this CPU has a softcap kernel")
	}
}

// BenchmarkSoftcapRow: softcapRow on a group's 256 scores (copied in from
// a saved row each time, in both), for each kernel set, with its softcap
// kernel and through softcapGo's loops.
func BenchmarkSoftcapRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	scores, row, tmp := make([]float32, 4*panel), make([]float32, 4*panel), make([]float32, 4*panel)
	for i := range scores {
		scores[i] = float32(rng.NormFloat64()) * 100
	}
	for _, ks := range kernelSets {
		for _, loops := range []bool{false, true} {
			if loops && ks.softcap == nil {
				continue
			}
			set, name := *ks, ks.name
			if loops {
				set.softcap, name = nil, name+"/loops"
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					copy(row, scores)
					softcapRow(&set, row, 50, tmp)
				}
			})
		}
	}
}
