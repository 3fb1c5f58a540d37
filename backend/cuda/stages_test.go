package cuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/kernelreg"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestBestStage: the choice recorded in docs/BENCHMARKS.md, by shape and compute
// capability.
func TestBestStage(t *testing.T) {
	for _, tc := range []struct {
		s        backend.Shape
		cc, want int
	}{
		{sdpatest.NamedShapes["small"], 89, 10},
		{sdpatest.NamedShapes["mission"], 89, 10},
		{sdpatest.NamedShapes["long"], 89, 10},
		{sdpatest.NamedShapes["large"], 89, 10},
		{backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 8, Sk: 8, D: 96}, 89, 10},
		{backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 8, Sk: 8, D: 256}, 120, 10},
		{sdpatest.NamedShapes["mission"], 80, 5},
		{sdpatest.NamedShapes["long"], 86, 6},
		{sdpatest.NamedShapes["large"], 80, 6},
		{backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 1, Sk: 513, D: 64}, 80, 6},
		{sdpatest.NamedShapes["mission"], 90, 9},
		{sdpatest.NamedShapes["long"], 90, 9},
		{sdpatest.NamedShapes["large"], 90, 9},
		{backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 8, Sk: 8, D: 192}, 90, 9}, // only stage 9 has D = 192 on Hopper
		{backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 8, Sk: 8, D: 96}, 90, 9},
	} {
		got := bestStage(tc.s, tc.cc)
		if got != tc.want {
			t.Errorf("bestStage(%v, %d) = %d, want %d", tc.s, tc.cc, got, tc.want)
		}
		if _, err := geometry(got, tc.s.D); err != nil {
			t.Errorf("bestStage(%v, %d): %v", tc.s, tc.cc, err)
		}
	}
}

// TestSupports: head dims without kernels and FP32 are ErrUnsupported, and
// so are the attention variants on the stages without them (all but 9 and
// 10). The mutants of TestSupportsCatchesMutants fail it.
func TestSupports(t *testing.T) {
	p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: 1, Hkv: 1, Sq: 4, Sk: 4, D: 96}, Precision: backend.FP8E4M3}
	if err := supports(p, 3); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("d=96: %v", err)
	}
	p.D = 64
	if err := supports(p, len(allStages)+1); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("stage past the list: %v", err)
	}
	// Stages 9 and 10: their own head dims and the multiples of 16 below
	// the largest (run on zero columns), nothing else.
	for _, st := range []int{tiles.HopperStage, tiles.AdaStage} {
		for _, d := range []int{16, 32, 64, 80, 96, 128, 160, 192, 240, 256} {
			p.D = d
			if err := supports(p, st); err != nil {
				t.Errorf("stage %d d=%d: %v", st, d, err)
			}
		}
		for _, d := range []int{8, 72, 100, 264, 512} {
			p.D = d
			if err := supports(p, st); !errors.Is(err, backend.ErrUnsupported) {
				t.Errorf("stage %d d=%d: %v, want ErrUnsupported", st, d, err)
			}
		}
	}
	// The attention variants: stages 9 and 10 compute them, every other
	// stage refuses them (never a plain result in their place).
	p.D = 64
	for _, v := range []backend.Variants{{SlidingWindow: 16}, {Softcap: 30}, {Sinks: []float32{0.5}}} {
		p.Variants = v
		for _, st := range allStages {
			err := supports(p, st)
			if st == tiles.HopperStage || st == tiles.AdaStage {
				if err != nil {
					t.Errorf("stage %d with %s: %v", st, v.Names(), err)
				}
			} else if !errors.Is(err, backend.ErrUnsupported) {
				t.Errorf("stage %d with %s: %v, want ErrUnsupported", st, v.Names(), err)
			}
		}
	}
	p.Variants = backend.Variants{}
	p.Precision = backend.FP32
	if err := supports(p, 1); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("fp32: %v", err)
	}
}

// TestNames: the public backends are "cuda" and the targets; the ladder
// stages are reachable through internal/kernelreg only, with the targets
// under their kernel names, in both builds (with -tags cuda and without).
func TestNames(t *testing.T) {
	var cudaNames []string
	for _, n := range backend.Names() {
		if strings.HasPrefix(n, "cuda") {
			cudaNames = append(cudaNames, n)
		}
	}
	if want := []string{"cuda", "cuda/sm90", "cuda/sm89", "cuda/sm80"}; !slices.Equal(cudaNames, want) {
		t.Errorf("registered cuda backends %v, want %v", cudaNames, want)
	}
	want := []string{"sm90", "sm89", "sm80"}
	for _, s := range tiles.Stages {
		want = append(want, fmt.Sprintf("stage%d", s))
	}
	if got := kernelreg.Names(); !slices.Equal(got, want) {
		t.Fatalf("kernelreg names %v, want %v", got, want)
	}
	for _, n := range want {
		b, err := kernelreg.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		if b.Name() != "cuda/"+n {
			t.Errorf("kernel %s is backend %q, want %q", n, b.Name(), "cuda/"+n)
		}
	}
	for stage, name := range map[int]string{tiles.HopperStage: "sm90", tiles.AdaStage: "sm89", 3: "stage3"} {
		if got := kernelName(stage); got != name {
			t.Errorf("kernelName(%d) = %q, want %q", stage, got, name)
		}
	}
}
