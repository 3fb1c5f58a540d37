// Command basic runs causal FP8 attention on random inputs and prints the
// result's first row and its distance from float32 attention.
package main

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/sdpa"
)

func main() {
	const b, h, s, d = 1, 4, 128, 64
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	q, err := sdpa.NewTensor(rnd(b*h*s*d), b, h, s, d)
	if err != nil {
		log.Fatal(err)
	}
	k, _ := sdpa.NewTensor(rnd(b*h*s*d), b, h, s, d)
	v, _ := sdpa.NewTensor(rnd(b*h*s*d), b, h, s, d)

	out8, err := sdpa.Attention(q, k, v, &sdpa.Options{Mask: sdpa.CausalUpperLeft, Precision: sdpa.FP8E4M3})
	if err != nil {
		log.Fatal(err)
	}
	out32, err := sdpa.Attention(q, k, v, &sdpa.Options{Mask: sdpa.CausalUpperLeft})
	if err != nil {
		log.Fatal(err)
	}
	var num, den float64
	for i := range out32.Data {
		e := float64(out8.Data[i] - out32.Data[i])
		num += e * e
		den += float64(out32.Data[i]) * float64(out32.Data[i])
	}
	run, not := runnable()
	fmt.Printf("backends: %v (registered, not runnable here: %d)\n", run, len(not))
	fmt.Printf("out[0,0,0,:4] fp8 %.4f  fp32 %.4f\n", out8.Data[:4], out32.Data[:4])
	fmt.Printf("relative L2 distance fp8 vs fp32: %.4f\n", math.Sqrt(num/den))
}

// runnable splits the registered backends into those this build and
// machine can run and the others (cuda without -tags cuda, or without a
// GPU).
func runnable() (run, not []string) {
	for _, n := range sdpa.Backends() {
		if _, err := sdpa.Open(n); err != nil {
			not = append(not, n)
			continue
		}
		run = append(run, n)
	}
	return run, not
}
