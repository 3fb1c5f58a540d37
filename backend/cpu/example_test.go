package cpu_test

import (
	"fmt"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/sdpa"
)

// A server bounds the CPU backend to two goroutines per call that never
// spin between calls, registers it under a name of its own, and selects it
// from package sdpa.
func ExampleNewConfig() {
	be, err := cpu.NewConfig("cpu-serving", cpu.Config{Workers: 2, Spin: -1})
	if err != nil {
		panic(err)
	}
	if err := backend.Register(be, -1); err != nil { // -1: only when named
		panic(err)
	}
	// One query attending to two keys with equal scores: the output is the
	// mean of the two value rows.
	q, _ := sdpa.NewTensor([]float32{1, 0}, 1, 1, 1, 2)
	k, _ := sdpa.NewTensor([]float32{1, 0, 1, 0}, 1, 1, 2, 2)
	v, _ := sdpa.NewTensor([]float32{1, 2, 3, 4}, 1, 1, 2, 2)
	out, err := sdpa.Attention(q, k, v, &sdpa.Options{Backend: "cpu-serving"})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Data)
	// Output: [2 3]
}
