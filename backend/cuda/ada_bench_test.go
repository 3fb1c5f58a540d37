//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// BenchmarkAdaVariants: the Ada kernel (stage 10) at every head dim, plain
// (no mask, causal) and with each attention variant under the causal mask
// (a window of 1024 keys, a softcap of 50, sinks, all three): device time
// a call (CUDA events around graph replays, median), and GFLOP/s over the
// keys the rows see where there is no window. The plain cases need nothing
// the variants added, and a tree without them skips the other cases: the
// file run there and here compares the plain kernel before and after.
func BenchmarkAdaVariants(b *testing.B) {
	if !runnable(b, tiles.AdaStage) {
		b.Skip("no FP8 mma.sync")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []backend.Shape{
		{B: 1, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 64},
		{B: 1, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 96},
		{B: 1, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128},
		{B: 1, Hq: 16, Hkv: 8, Sq: 4096, Sk: 4096, D: 256},
	} {
		in := sdpatest.RandomInputs(rng, s, 1)
		sinks := normalSinks(rng, s.Hq, 0, 1)
		for _, c := range []struct {
			name string
			m    backend.Mask
			v    backend.Variants
		}{
			{"plain", backend.NoMask, backend.Variants{}},
			{"causal", backend.CausalLowerRight, backend.Variants{}},
			{"window=1024", backend.CausalLowerRight, backend.Variants{SlidingWindow: 1024}},
			{"softcap=50", backend.CausalLowerRight, backend.Variants{Softcap: 50}},
			{"sinks", backend.CausalLowerRight, backend.Variants{Sinks: sinks}},
			{"all", backend.CausalLowerRight, backend.Variants{SlidingWindow: 1024, Softcap: 50, Sinks: sinks}},
		} {
			p, _, _ := sdpatest.NewProblem(s, in, 0.125, c.m, backend.FP8E4M3)
			p.Variants = c.v
			b.Run(fmt.Sprintf("D%d/%s", s.D, c.name), func(b *testing.B) {
				times, err := testBackend(tiles.AdaStage).DeviceTimes(p, max(b.N, 20))
				if c.v.Any() && errors.Is(err, backend.ErrUnsupported) {
					b.Skipf("the variants on this tree: %v", err)
				}
				if err != nil {
					b.Fatal(err)
				}
				med := median(times)
				b.ReportMetric(med, "us/call")
				if c.v.SlidingWindow == 0 {
					b.ReportMetric(s.FLOPs(c.m)/med/1e3, "GFLOP/s")
				}
			})
		}
	}
}
