package fp8

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/internal/seed"
)

// TestBulkEqualsLoops: the exported Amax, EncodeE4M3 and RoundE4M3 (vector prefix
// where the build has one, Go tail) equal the Go loops at every length up
// to 70, so that prefix and tail meet correctly.
func TestBulkEqualsLoops(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 7))
	for n := range 71 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 300)
		}
		if n > 0 {
			x[rng.IntN(n)] = 1e4 // overflows at scale 1
		}
		if got, want := Amax(x), amaxGo(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("Amax n=%d: %v, want %v", n, got, want)
		}
		for _, m := range []Mode{SatFinite, NoSat, Torch} {
			for _, scale := range []float32{1, 0.37} {
				got, want := make([]E4M3, n), make([]E4M3, n)
				EncodeE4M3(got, x, scale, m)
				encodeE4M3Go(want, x, scale, m)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("EncodeE4M3 n=%d %v scale %v: element %d %#02x, want %#02x", n, m, scale, i, uint8(got[i]), uint8(want[i]))
					}
				}
				gotV, wantV := make([]float32, n), make([]float32, n)
				RoundE4M3(gotV, x, scale, m)
				roundE4M3Go(wantV, x, scale, m)
				for i := range wantV {
					if math.Float32bits(gotV[i]) != math.Float32bits(wantV[i]) {
						t.Fatalf("RoundE4M3 n=%d %v scale %v: element %d %#08x, want %#08x", n, m, scale, i, math.Float32bits(gotV[i]), math.Float32bits(wantV[i]))
					}
				}
			}
		}
	}
}

// BenchmarkQuantize: per-(batch, head) E4M3 quantization of the mission
// shape's Q (2·8·256·64 elements) beside one scalar amax pass over the same
// data, the yardstick of the inference issue's target (<= 1.5x).
func BenchmarkQuantize(b *testing.B) {
	const n, group = 2 * 8 * 256 * 64, 256 * 64
	x := make([]float32, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	data, scales, vals := make([]E4M3, n), make([]float32, n/group), make([]float32, n)
	var sink float32
	for _, bc := range []struct {
		name string
		fn   func()
	}{
		{"amax-scalar", func() { sink += amaxGo(x) }},
		{"amax", func() { sink += Amax(x) }},
		{"quantize", func() { _ = QuantizeE4M3Into(data, scales, x, group) }},
		{"round", func() { RoundE4M3(vals, x, 0.01, NoSat) }},
		{"quantize-scalar", func() {
			for g := range scales {
				chunk := x[g*group : (g+1)*group]
				s := ScaleForAmax(amaxGo(chunk))
				scales[g] = s
				encodeE4M3Go(data[g*group:(g+1)*group], chunk, s, NoSat)
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				bc.fn()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
		})
	}
	_ = sink
}
