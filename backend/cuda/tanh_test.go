//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestTanhApprox measures the softcap's tanh on the GPU (common.cuh's
// tanh_approx, tanh.approx.f32, which stages 9 and 10 run; the paged
// kernels take CUDA's tanhf, paged/warp.cuh's softcap_score) against the
// bound the tolerances use
// (sdpatest.TanhApproxRelative and TanhApproxAbsolute): float32 values of
// every exponent, subnormals included, a dense sweep of [-10, 10], and
// values where tanh is ±1 to float32's precision; ±Inf give ±1 and NaN
// stays NaN. It logs the largest relative error seen. The kernel mutant
// tanh-approx-loose (a result 2^-10 too large) fails it.
func TestTanhApprox(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	mod := testModule(t, d, false)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 62))
	var x []float32
	for e := -149; e <= 127; e++ {
		for range 64 {
			v := float32(math.Ldexp(1+rng.Float64(), e))
			if rng.IntN(2) == 0 {
				v = -v
			}
			x = append(x, v)
		}
	}
	for i := range 1 << 20 {
		x = append(x, -10+20*float32(i)/(1<<20))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()))
	y := make([]float32, len(x))
	for i := range y {
		y[i] = float32(math.NaN())
	}
	n := int32(len(x))
	err = d.do(func() error {
		fn, err := mod.Function("fp8attn_tanh")
		if err != nil {
			return err
		}
		xb, err := cu.MemAlloc(int64(4 * len(x)))
		if err != nil {
			return err
		}
		defer cu.MemFree(xb)
		yb, err := cu.MemAlloc(int64(4 * len(y)))
		if err != nil {
			return err
		}
		defer cu.MemFree(yb)
		if err := cu.MemcpyHtoD(xb, unsafe.Pointer(&x[0]), int64(4*len(x))); err != nil {
			return err
		}
		if err := cu.MemcpyHtoD(yb, unsafe.Pointer(&y[0]), int64(4*len(y))); err != nil {
			return err
		}
		xp, yp := uint64(xb), uint64(yb)
		blocks := (len(x) + 255) / 256
		if err := fn.Launch(blocks, 1, 1, 256, 1, 1, 0, cu.Stream{}, []unsafe.Pointer{unsafe.Pointer(&xp), unsafe.Pointer(&yp), unsafe.Pointer(&n)}); err != nil {
			return err
		}
		if err := cu.Synchronize(); err != nil {
			return err
		}
		return cu.MemcpyDtoH(unsafe.Pointer(&y[0]), yb, int64(4*len(y)))
	})
	if err != nil {
		t.Fatal(err)
	}
	worstRel := 0.0
	bad := 0
	for i, v := range x {
		want := math.Tanh(float64(v))
		got := float64(y[i])
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Errorf("tanh(NaN) = %g, want NaN", got)
			}
			continue
		}
		e := math.Abs(got - want)
		if !(e <= math.Abs(want)*sdpatest.TanhApproxRelative+sdpatest.TanhApproxAbsolute) {
			if bad++; bad <= 10 {
				t.Errorf("tanh(%g) = %g, want %g: error %.3g past the bound", v, got, want, e)
			}
		}
		if math.Abs(want) >= 0x1p-126 {
			worstRel = max(worstRel, e/math.Abs(want))
		}
	}
	t.Logf("%d values: largest relative error 2^%.3f (bound 2^%.3f)", len(x), math.Log2(worstRel), math.Log2(sdpatest.TanhApproxRelative))
	if bad > 0 {
		t.Errorf("%d of %d values past the bound", bad, len(x))
	}
}
