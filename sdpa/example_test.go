package sdpa_test

import (
	"fmt"

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
