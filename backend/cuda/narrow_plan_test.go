package cuda

import (
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/mutant"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// TestNarrowPlan: the masked calls at D 128 that take the narrow form, on
// an H200's 132 SMs: the shapes it was measured on (public call on FP8
// tensors, graph replay; docs/design/hopper-prefill.md) and the bounds.
func TestNarrowPlan(t *testing.T) {
	cfg, err := tiles.Hopper(128)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		s    backend.Shape
		v    backend.Variants
		want bool
	}{
		{"one wave, two blocks an SM, short rows (ahead: 17.5 against 18.2 µs)", backend.Shape{B: 2, Hq: 8, Hkv: 8, Sq: 1024, Sk: 1024, D: 128}, backend.Variants{}, true},
		{"one block an SM (behind: 15.9 against 15.5 µs)", backend.Shape{B: 1, Hq: 8, Hkv: 8, Sq: 1024, Sk: 1024, D: 128}, backend.Variants{}, false},
		{"one wave over long rows (behind: 115.6 against 110.4 µs)", backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 512, Sk: 8704, D: 128}, backend.Variants{}, false},
		{"many waves (behind: 847 against 814-819 µs)", backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, backend.Variants{}, false},
		{"many waves under a window (level: 491-495 against 488-491 µs)", backend.Shape{B: 4, Hq: 32, Hkv: 32, Sq: 4096, Sk: 4096, D: 128}, backend.Variants{SlidingWindow: 1024}, false},
		{"one wave to the last block, 16 tiles", backend.Shape{B: 1, Hq: 12, Hkv: 12, Sq: 1408, Sk: 2048, D: 128}, backend.Variants{}, true},
		{"one row block past one wave", backend.Shape{B: 1, Hq: 12, Hkv: 12, Sq: 1472, Sk: 2048, D: 128}, backend.Variants{}, false},
		{"17 tiles", backend.Shape{B: 1, Hq: 12, Hkv: 12, Sq: 1408, Sk: 2080, D: 128}, backend.Variants{}, false},
		{"one block more than the SMs", backend.Shape{B: 1, Hq: 19, Hkv: 19, Sq: 448, Sk: 448, D: 128}, backend.Variants{}, true},
		{"as many blocks as SMs", backend.Shape{B: 1, Hq: 12, Hkv: 12, Sq: 704, Sk: 704, D: 128}, backend.Variants{}, false},
	} {
		p := &backend.Problem{Shape: c.s, Mask: backend.CausalLowerRight, Variants: c.v}
		x, y, z, _ := cfg.NarrowLaunch(c.s.B, c.s.Hq, c.s.Sq)
		if got := narrowPlan(132, x*y*z, blockTiles(p, cfg.BlockM, cfg.BlockN)); got != c.want {
			t.Errorf("%s: narrow %v, want %v (%d narrow blocks, the longest wide block %d tiles)", c.what, got, c.want, x*y*z, blockTiles(p, cfg.BlockM, cfg.BlockN))
		}
	}
}

// TestNarrowPlanCatchesMutants: the plan's bounds, broken on purpose, fail
// TestNarrowPlan (FP8ATTN_MUTANTS=1).
func TestNarrowPlanCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cuda", "backend/cuda/narrow_plan.go"
	tests := []string{"TestNarrowPlan"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "grids of one block an SM", File: file, Pkg: pkg, Tests: tests,
			Old: "narrowBlocks > sms &&", New: "narrowBlocks > 0 &&"},
		{Name: "grids past one wave", File: file, Pkg: pkg, Tests: tests,
			Old: "narrowBlocks <= tiles.NarrowPerSM*sms", New: "narrowBlocks <= 2*tiles.NarrowPerSM*sms"},
		{Name: "rows of any length", File: file, Pkg: pkg, Tests: tests,
			Old: "wideTiles <= narrowMostTiles", New: "wideTiles >= 0"},
		{Name: "grids of as many blocks as SMs", File: file, Pkg: pkg, Tests: tests,
			Old: "narrowBlocks > sms &&", New: "narrowBlocks >= sms &&"},
		{Name: "one tile fewer", File: file, Pkg: pkg, Tests: tests,
			Old: "wideTiles <= narrowMostTiles", New: "wideTiles < narrowMostTiles"},
	})
}
