package sdpa_test

import (
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// BenchmarkPublicCall: sdpa.Attention from float32 host slices on the mission
// shape, FP32 and FP8E4M3 (quantization of Q, K and V included) side by side,
// as a user calls it. The inference issue's target is FP8 >= 0.9x FP32.
func BenchmarkPublicCall(b *testing.B) {
	s := sdpatest.NamedShapes["mission"]
	rng := rand.New(rand.NewPCG(1, 2))
	q, k, v := randTensor(rng, s.B, s.Hq, s.Sq, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D)
	for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
		b.Run(prec.String(), func(b *testing.B) {
			opts := &sdpa.Options{Precision: prec, Backend: "cpu"}
			for b.Loop() {
				if _, err := sdpa.Attention(q, k, v, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(s.FLOPs(sdpa.NoMask)/b.Elapsed().Seconds()*float64(b.N)/1e9, "GFLOP/s")
		})
	}
}
