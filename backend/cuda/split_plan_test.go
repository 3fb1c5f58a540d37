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
		if got, _ := keySplitPlan(c.kd, c.sms, c.blocks, c.tiles, c.rows, c.d); got != c.want {
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

// TestQuantizeFirst: the float32 calls measured both ways on the H200
// (public call on float32 device tensors, `sdpabench -backend cuda`,
// graph replay, p50s of two rounds, 2026-12-03; fused / quantized first,
// µs) take the faster way by the model: the split's modelled saving
// against Quantize's second pass.
func TestQuantizeFirst(t *testing.T) {
	for _, c := range []struct {
		s         backend.Shape
		m         backend.Mask
		bn        int
		wantFirst bool
	}{
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 512, Sk: 16384, D: 128}, backend.NoMask, 128, true},           // 232.9-233.2 / 180.6-180.7
		{backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 128, Sk: 8320, D: 128}, backend.CausalLowerRight, 128, true}, // 122.3-123.2 / 113.8-114.2
		{backend.Shape{B: 2, Hq: 8, Hkv: 2, Sq: 256, Sk: 8192, D: 64}, backend.CausalLowerRight, 128, true},   // 74.3-74.4 / 48.1-48.2
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 512, Sk: 4096, D: 256}, backend.NoMask, 64, true},             // 120.4-120.6 / 116.7-117.1
		{backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 1024, Sk: 4096, D: 128}, backend.NoMask, 128, false},          // 70.5-70.6 / 77.7-78.0
		{backend.Shape{B: 1, Hq: 8, Hkv: 2, Sq: 1024, Sk: 3072, D: 128}, backend.NoMask, 128, false},          // 45.4-45.6 / 46.4-46.6
	} {
		s := c.s
		p := &backend.Problem{Shape: s, Mask: c.m}
		blocks := s.B * s.Hq * ((s.Sq + 127) / 128)
		parts, saves := keySplitPlan(s.D, 132, blocks, blockTiles(p, 128, c.bn), float64(s.B*s.Hq*s.Sq), s.D)
		floatBytes := 4 * float64(s.D*s.B) * float64(s.Hq*s.Sq+2*s.Hkv*s.Sk)
		if got := parts > 1 && quantizeFirst(saves, floatBytes); got != c.wantFirst {
			t.Errorf("%+v %v: %d parts saving %.1f µs of %.1f MB: quantized first %v, want %v", s, c.m, parts, saves, floatBytes/1e6, got, c.wantFirst)
		}
	}
}

// TestKeySplitPlanCatchesMutants: the plan's bounds and the choice of
// Quantize first, broken on purpose, fail TestKeySplitPlan and
// TestQuantizeFirst (FP8ATTN_MUTANTS=1).
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
		{Name: "Quantize's launches free", File: file, Pkg: pkg, Tests: []string{"TestQuantizeFirst"},
			Old: "return saves > quantizeLaunches+", New: "return saves > "},
		{Name: "Quantize's second pass twice as fast", File: file, Pkg: pkg, Tests: []string{"TestQuantizeFirst"},
			Old: "floatBytes/secondPassBytesPerSec*1e6", New: "floatBytes/(2*secondPassBytesPerSec)*1e6"},
		{Name: "the saving of the whole walk", File: file, Pkg: pkg, Tests: []string{"TestQuantizeFirst"},
			Old: "return best, whole - bestCost", New: "return best, whole"},
	})
}
