package sdpa_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/sdpa"
)

func ExampleAttention() {
	// One query attending over two keys: D=1, scale 1, scores 2 and 0.
	q, _ := sdpa.NewTensor([]float32{1}, 1, 1, 1, 1)
	k, _ := sdpa.NewTensor([]float32{2, 0}, 1, 1, 2, 1)
	v, _ := sdpa.NewTensor([]float32{10, 20}, 1, 1, 2, 1)
	out, err := sdpa.Attention(q, k, v, &sdpa.Options{Scale: 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.4f\n", out.Data[0]) // (10e² + 20) / (e² + 1)
	// Output: 11.1920
}

func ExampleOptions_outlierChannels() {
	// Keys whose channels 3 and 17 are 20 times larger than the rest, as
	// keys of language models often have: FP8 loses most in those channels.
	const b, h, s, d = 1, 2, 64, 32
	rng := rand.New(rand.NewPCG(1, 2))
	q, k, v := make([]float32, b*h*s*d), make([]float32, b*h*s*d), make([]float32, b*h*s*d)
	for i := range q {
		q[i], k[i], v[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())
		if c := i % d; c == 3 || c == 17 {
			k[i] *= 20
		}
	}
	qt, _ := sdpa.NewTensor(q, b, h, s, d)
	kt, _ := sdpa.NewTensor(k, b, h, s, d)
	vt, _ := sdpa.NewTensor(v, b, h, s, d)
	exact, _ := sdpa.Attention(qt, kt, vt, &sdpa.Options{Backend: "reference"})
	relErr := func(o *sdpa.Options) float64 {
		out, err := sdpa.Attention(qt, kt, vt, o)
		if err != nil {
			panic(err)
		}
		var num, den float64
		for i, x := range out.Data {
			e := float64(x - exact.Data[i])
			num, den = num+e*e, den+float64(exact.Data[i])*float64(exact.Data[i])
		}
		return math.Sqrt(num / den)
	}
	plain := relErr(&sdpa.Options{Precision: sdpa.FP8E4M3})
	split := relErr(&sdpa.Options{Precision: sdpa.FP8E4M3, OutlierChannels: 2}) // 0.29x of plain
	fmt.Println("less than half the error with the two largest channels split:", split < plain/2)
	// Output: less than half the error with the two largest channels split: true
}
