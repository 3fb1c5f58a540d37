package fp8

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

// TestDecodeE4M3Vector holds DecodeE4M3 (the vector path where the CPU has
// one) to the table loop bit for bit: all 256 codes in random order, scales
// that round, overflow, underflow to subnormals, are 0, Inf or NaN, and
// random lengths at misaligned offsets inside guard regions.
func TestDecodeE4M3Vector(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 3))
	scales := []float32{1, 0.5, -2, 3.7, 1e-30, 1e30, 0, float32(math.Inf(1)), float32(math.NaN()), 448}
	const guard = 16
	for trial := 0; trial < 400; trial++ {
		n := rng.IntN(300)
		if trial < len(scales) {
			n = 256 + rng.IntN(20)
		}
		scale := scales[trial%len(scales)]
		off := rng.IntN(8)
		src := make([]E4M3, n)
		for i := range src {
			src[i] = E4M3(rng.IntN(256))
		}
		if n >= 256 {
			for i, c := range rng.Perm(256) {
				src[i] = E4M3(c)
			}
		}
		buf := make([]float32, off+n+2*guard)
		for i := range buf {
			buf[i] = -1234.5
		}
		dst := buf[guard+off : guard+off+n]
		want := make([]float32, n)
		decodeE4M3Table(want, src, scale)
		if got := DecodeE4M3(dst, src, scale); got != n {
			t.Fatalf("DecodeE4M3 returned %d, want %d", got, n)
		}
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("scale %v: code %#02x decodes to %#08x, want %#08x", scale, uint8(src[i]), math.Float32bits(dst[i]), math.Float32bits(want[i]))
			}
		}
		for i, x := range buf {
			if (i < guard+off || i >= guard+off+n) && x != -1234.5 {
				t.Fatalf("n=%d off=%d: guard element %d overwritten", n, off, i)
			}
		}
	}
}

// BenchmarkDecodeE4M3: DecodeE4M3 (the vector path where the CPU has one)
// beside the table loop.
func BenchmarkDecodeE4M3(b *testing.B) {
	src := make([]E4M3, 4096)
	for i := range src {
		src[i] = E4M3(i)
	}
	dst := make([]float32, len(src))
	for _, bc := range []struct {
		name string
		fn   func([]float32, []E4M3, float32)
	}{
		{"best", func(d []float32, s []E4M3, x float32) { DecodeE4M3(d, s, x) }},
		{"table", decodeE4M3Table},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				bc.fn(dst, src, 0.75)
			}
		})
	}
}
