// Command kvcache keeps keys and values quantized to FP8 E4M3 (as a KV cache
// would) and runs grouped-query decoding steps on them without
// re-quantizing: 8 query heads share 2 KV heads.
package main

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/fp8attn/fp8attn/sdpa"
)

func main() {
	const b, hq, hkv, ctx, d = 1, 8, 2, 512, 128
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	k, _ := sdpa.NewTensor(rnd(b*hkv*ctx*d), b, hkv, ctx, d)
	v, _ := sdpa.NewTensor(rnd(b*hkv*ctx*d), b, hkv, ctx, d)
	kCache, err := sdpa.Quantize(k) // one scale per (batch, head)
	if err != nil {
		log.Fatal(err)
	}
	vCache, _ := sdpa.Quantize(v)
	fmt.Printf("cache: %d bytes of E4M3 instead of %d of float32\n", 2*len(kCache.Data), 2*4*len(k.Data))

	for step := 0; step < 3; step++ {
		q, _ := sdpa.NewTensor(rnd(b*hq*1*d), b, hq, 1, d) // one new token
		q8, _ := sdpa.Quantize(q)
		out, lse, err := sdpa.AttentionQuantized(q8, kCache, vCache, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("step %d: out[head 0][:3] = %.4f, lse[head 0] = %.4f\n", step, out.Data[:3], lse[0])
	}
}
