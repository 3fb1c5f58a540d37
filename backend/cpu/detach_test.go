package cpu_test

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/internal/mutant"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestDetachedHelper: where the pool's cores are shared and a helper falls
// behind holding a block (it sleeps before writing the block's output;
// the caller sleeps a little on its first block, for the helper to join),
// the call computes the block itself and returns before the helper
// wakes, with the output a call without the stall writes, bit for bit;
// and the helper, waking after the call returned, writes nothing (the
// output, poisoned after the call, stays poisoned).
func TestDetachedHelper(t *testing.T) {
	const stall = 300 * time.Millisecond
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 71))
	for _, c := range []struct {
		name string
		s    backend.Shape
		prec backend.Precision
		mask backend.Mask
	}{
		{"fp32", backend.Shape{B: 1, Hq: 4, Hkv: 4, Sq: 256, Sk: 256, D: 64}, backend.FP32, backend.NoMask},
		{"fp8-causal", backend.Shape{B: 1, Hq: 4, Hkv: 2, Sq: 256, Sk: 256, D: 64}, backend.FP8E4M3, backend.CausalUpperLeft},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := sdpatest.RandomInputs(rng, c.s, 1)
			scale := float32(1 / math.Sqrt(float64(c.s.D)))
			want, _, _ := sdpatest.NewProblem(c.s, in, scale, c.mask, c.prec)
			if err := cpu.New(1).Attention(want); err != nil {
				t.Fatal(err)
			}
			p, _, _ := sdpatest.NewProblem(c.s, in, scale, c.mask, c.prec)
			be, err := cpu.NewConfig("cpu-detach", cpu.Config{Workers: 2, Spin: -1})
			if err != nil {
				t.Fatal(err)
			}
			warm, _, _ := sdpatest.NewProblem(c.s, in, scale, c.mask, c.prec)
			if err := be.Attention(warm); err != nil { // the helper started and parked
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
			var waited, stalled, woke atomic.Bool
			cpu.SetCommitHook(func(w int) {
				switch {
				case w == 0 && !waited.Swap(true):
					time.Sleep(20 * time.Millisecond) // for the helper to join
				case w > 0 && !stalled.Swap(true):
					time.Sleep(stall)
					woke.Store(true)
				}
			})
			defer cpu.SetCommitHook(nil)
			cpu.MarkShared(be, time.Minute)
			start := time.Now()
			if err := be.Attention(p); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if !stalled.Load() {
				t.Skip("no helper joined the call")
			}
			if woke.Load() {
				t.Errorf("the call took %v: it waited for the stalled helper", took)
			}
			for i := range want.Out {
				if math.Float32bits(p.Out[i]) != math.Float32bits(want.Out[i]) {
					t.Fatalf("out[%d] = %v, want %v", i, p.Out[i], want.Out[i])
				}
			}
			for i := range want.LSE {
				if math.Float32bits(p.LSE[i]) != math.Float32bits(want.LSE[i]) {
					t.Fatalf("lse[%d] = %v, want %v", i, p.LSE[i], want.LSE[i])
				}
			}
			nan := float32(math.NaN())
			for i := range p.Out {
				p.Out[i] = nan
			}
			for !woke.Load() {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			if err := be.Attention(warm); err != nil { // the helper back at work
				t.Fatal(err)
			}
			for i, x := range p.Out {
				if x == x {
					t.Fatalf("out[%d] = %v written after the call returned", i, x)
				}
			}
		})
	}
}

// TestDetachCatchesMutants: the detached call broken on purpose fails
// TestDetachedHelper (FP8ATTN_MUTANTS=1).
func TestDetachCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cpu", "backend/cpu/detach.go"
	tests := []string{"TestDetachedHelper"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a late helper writes its block", File: file, Pkg: pkg,
			Old: "\tif !c.enter() {\n\t\treturn false\n\t}\n\tif !c.state[sc.item].CompareAndSwap(itemOpen, itemWriting) {\n\t\tc.leave()\n\t\treturn false\n\t}\n\treturn true",
			New: "\tc.gate.Add(1)\n\treturn true", Tests: tests},
		{Name: "the caller never takes a stalled block", File: file, Pkg: pkg,
			Old: "if time.Since(start) >= grace {", New: "if time.Since(start) >= grace+time.Hour {", Tests: tests},
	})
}
