//go:build !purego

package fp8

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

// TestDecodeE4M3Kernels holds each assembly decoder this CPU runs (not only
// the one DecodeE4M3 picks) to the table, bit for bit, on all 256 codes and
// several scales.
func TestDecodeE4M3Kernels(t *testing.T) {
	kernels := map[string]struct {
		ok    bool
		width int
		fn    func(*float32, *E4M3, int, float32)
	}{
		"avx2":   {hasAVX2, 8, decodeE4M3AVX2},
		"avx512": {hasAVX512, 16, decodeE4M3AVX512},
	}
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 4))
	for name, k := range kernels {
		if !k.ok {
			t.Logf("%s: not on this CPU", name)
			continue
		}
		for _, scale := range []float32{1, 0.5, -3.7, 1e-30, 1e30, 0, float32(math.Inf(-1)), float32(math.NaN())} {
			src := make([]E4M3, 256+k.width)
			for i, c := range rng.Perm(256) {
				src[i] = E4M3(c)
			}
			dst := make([]float32, len(src)+1)
			dst[len(src)] = 42
			k.fn(&dst[0], &src[0], len(src), scale)
			want := make([]float32, len(src))
			decodeE4M3Table(want, src, scale)
			for i := range src {
				if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s scale %v: code %#02x -> %#08x, want %#08x", name, scale, uint8(src[i]), math.Float32bits(dst[i]), math.Float32bits(want[i]))
				}
			}
			if dst[len(src)] != 42 {
				t.Fatalf("%s: wrote past n", name)
			}
		}
	}
}
