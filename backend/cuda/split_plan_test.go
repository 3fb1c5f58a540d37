package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestKeySplitPlan: the key split's plan on the grids it is for and those
// it leaves alone, on an H200's 132 SMs (the modelled times in the
// comments, µs, from splitCost).
func TestKeySplitPlan(t *testing.T) {
	for _, c := range []struct {
		what                   string
		kd, sms, blocks, tiles int
		rows                   float64
		d, want                int
	}{
		// 128 queries of 32 heads after 8192 keys: 86.1 unsplit, 31.6 in
		// four parts (five would take a second wave).
		{"a chunk after a long context", 128, 132, 32, 65, 4096, 128, 4},
		{"the same on a GPU of 66 SMs", 128, 66, 32, 65, 4096, 128, 2},
		// 44.85 unsplit, 31.05 in two parts: under three quarters.
		{"64 blocks of 32 tiles", 128, 132, 64, 32, 8192, 128, 2},
		// 28.3 unsplit, 27.9 in two parts: not a quarter less.
		{"a gain too small", 256, 132, 60, 17, 7680, 256, 1},
		{"parts of fewer than 8 tiles", 64, 132, 8, 12, 1024, 64, 1},
		{"more than half the SMs", 64, 132, 128, 16, 16384, 64, 1},
		{"no block", 128, 132, 0, 65, 0, 128, 1},
		{"a kernel head dim without a cost", 80, 132, 8, 64, 1024, 80, 1},
	} {
		if got := keySplitPlan(c.kd, c.sms, c.blocks, c.tiles, c.rows, c.d); got != c.want {
			t.Errorf("%s: %d parts, want %d", c.what, got, c.want)
		}
	}
	for _, c := range []struct {
		s    backend.Shape
		m    backend.Mask
		v    backend.Variants
		want int
	}{
		{backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 128, Sk: 8320, D: 128}, backend.CausalLowerRight, backend.Variants{}, 65},
		{backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 300, Sk: 1000, D: 64}, backend.CausalUpperLeft, backend.Variants{}, 3},
		{backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 100, Sk: 2000, D: 64}, backend.CausalLowerRight, backend.Variants{SlidingWindow: 300}, 4},
		{backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 500, Sk: 400, D: 64}, backend.CausalLowerRight, backend.Variants{}, 4},
		{backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 200, Sk: 50, D: 64}, backend.CausalLowerRight, backend.Variants{}, 1},
	} {
		p := &backend.Problem{Shape: c.s, Mask: c.m, Variants: c.v}
		if got := blockTiles(p, 128, 128); got != c.want {
			t.Errorf("%+v %v window %d: the longest block loads %d tiles, want %d", c.s, c.m, c.v.SlidingWindow, got, c.want)
		}
	}
}

// TestKeySplitPlanCatchesMutants: the plan's bounds, broken on purpose,
// fail TestKeySplitPlan (FP8ATTN_MUTANTS=1).
func TestKeySplitPlanCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cuda", "backend/cuda/split_plan.go"
	tests := []string{"TestKeySplitPlan"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a split at any modelled gain", File: file, Pkg: pkg, Tests: tests,
			Old: "best, bestCost := 1, splitGain*whole", New: "best, bestCost := 1, whole"},
		{Name: "parts past one wave", File: file, Pkg: pkg, Tests: tests,
			Old: "parts*blocks <= sms &&", New: "parts*blocks <= 2*sms &&"},
		{Name: "parts of any number of tiles", File: file, Pkg: pkg, Tests: tests,
			Old: "parts*minPartTiles <= tiles", New: "parts <= tiles"},
		{Name: "the longest block's tiles counted from key 0", File: file, Pkg: pkg, Tests: tests,
			Old: "(hi+blockN-1)/blockN-lo/blockN", New: "(hi+blockN-1)/blockN"},
	})
}
