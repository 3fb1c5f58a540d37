package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestScoresKeys4 holds every kernel set's scoresKeys4 to its own scores4,
// bit for bit, on the keys [lo, hi) asked for, for random ranges (each
// vector boundary among them), head dims and row strides (a panel and
// more): the columns outside the set's vectors that hold [lo, hi), and the
// floats between the rows, must keep the poison written before, and
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
				stride := panel
				if trial%3 > 0 {
					stride += 1 + rng.IntN(3*panel)
				}
				s, ok := guarded(rng, 3*stride+panel, func(int) float32 { return math.Float32frombits(poison) })
				ks.scoresKeys4(s, q, kt, d, scale, lo, hi, stride)
				if err := ok(); err != nil {
					t.Fatalf("d=%d keys [%d, %d) stride %d: %v", d, lo, hi, stride, err)
				}
				v0, v1 := setKeys(ks.name, lo, hi)
				for i, x := range s {
					r, j := i/stride, i%stride
					got := math.Float32bits(x)
					switch {
					case j >= lo && j < hi && got != math.Float32bits(want[r*panel+j]):
						t.Fatalf("d=%d keys [%d, %d) stride %d: s[%d][%d] = %v, want %v", d, lo, hi, stride, r, j, x, want[r*panel+j])
					case (j < v0 || j >= v1) && got != poison:
						t.Fatalf("d=%d keys [%d, %d) stride %d: s[%d][%d] = %v written, outside the keys' vectors [%d, %d)", d, lo, hi, stride, r, j, x, v0, v1)
					}
				}
			}
		})
	}
	if tested == 0 {
		t.Skip("no kernel set on this CPU has scoresKeys4")
	}
}

// setKeys returns the keys [v0, v1) a kernel set's scoresKeys4 may write
// for the keys [lo, hi): the avx2 set's key vectors (keyVectors8), the
// others' blocks of 16 (keyBlocks: NEON's; the Go set writes fewer).
func setKeys(set string, lo, hi int) (v0, v1 int) {
	if set == "avx2" {
		k0, n := keyVectors8(lo, hi)
		return k0, k0 + 8*n
	}
	k0, blocks := keyBlocks(lo, hi)
	return k0, k0 + 16*blocks
}

// TestKeyVectors8 checks keyVectors8 on every range of a panel: the fewest
// vectors of 8 from a multiple of 8 that hold it, at least two, inside the
// panel.
func TestKeyVectors8(t *testing.T) {
	for lo := range panel {
		for hi := lo + 1; hi <= panel; hi++ {
			k0, n := keyVectors8(lo, hi)
			fewest := max(2, (hi-lo&^7+7)/8)
			if k0%8 != 0 || k0 > lo || k0+8*n < hi || k0 < 0 || k0+8*n > panel || n != fewest {
				t.Fatalf("keyVectors8(%d, %d) = %d, %d: keys [%d, %d), want %d vectors of 8 from a multiple of 8 inside the panel holding [%d, %d)", lo, hi, k0, n, k0, k0+8*n, fewest, lo, hi)
			}
		}
	}
}

// TestKeyBlocks checks keyBlocks on every range of a panel: its blocks
// start at a multiple of 8, hold the keys, stay inside the panel, and are
// as few as blocks from a multiple of 8 can be.
func TestKeyBlocks(t *testing.T) {
	for lo := range panel {
		for hi := lo + 1; hi <= panel; hi++ {
			k0, blocks := keyBlocks(lo, hi)
			fewest := (hi - lo&^7 + 15) / 16
			if k0%8 != 0 || k0 > lo || k0+16*blocks < hi || k0 < 0 || k0+16*blocks > panel || blocks != fewest {
				t.Fatalf("keyBlocks(%d, %d) = %d, %d: keys [%d, %d), want %d blocks from a multiple of 8 inside the panel holding [%d, %d)", lo, hi, k0, blocks, k0, k0+16*blocks, fewest, lo, hi)
			}
		}
	}
}
