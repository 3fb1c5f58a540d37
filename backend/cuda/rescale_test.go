//go:build cuda

package cuda

import (
	"math"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/fp8"
)

// TestRescaleAllCodes holds the paged prefill gather's re-encode
// (kernels/paged/rescale.cuh's rescale16, which on sm_89 and newer
// multiplies in half precision) to its definition, fp8.ToE4M3(value·r,
// SatFinite) in float32, byte for byte: every one of the 256 codes at every
// ratio a page's scale can have to its sequence's, 2^-k for k = 0 .. 149
// (float32's whole range, far past half's: the argument in rescale.cuh
// rests on products below 2^-20 rounding to zero either way), and 0. The
// cache holds no NaN (appends refuse them): a NaN code need only stay a
// NaN. The kernel mutant rescale-half-ftz (half's subnormals flushed) fails
// it.
func TestRescaleAllCodes(t *testing.T) {
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	mod := testModule(t, d, true)
	ratios := []float32{0}
	for k := 0; k <= 149; k++ {
		ratios = append(ratios, float32(math.Ldexp(1, -k)))
	}
	n := int32(len(ratios))
	got := make([]byte, 256*len(ratios))
	for i := range got {
		got[i] = 0x7F // poison: a NaN code, which no finite code may become
	}
	err = d.do(func() error {
		fn, err := mod.Function("fp8attn_rescale_check")
		if err != nil {
			return err
		}
		rb, err := cu.MemAlloc(int64(4 * len(ratios)))
		if err != nil {
			return err
		}
		defer cu.MemFree(rb)
		ob, err := cu.MemAlloc(int64(len(got)))
		if err != nil {
			return err
		}
		defer cu.MemFree(ob)
		if err := cu.MemcpyHtoD(rb, unsafe.Pointer(&ratios[0]), int64(4*len(ratios))); err != nil {
			return err
		}
		if err := cu.MemcpyHtoD(ob, unsafe.Pointer(&got[0]), int64(len(got))); err != nil {
			return err
		}
		rp, op := uint64(rb), uint64(ob)
		if err := fn.Launch(int(n), 1, 1, 16, 1, 1, 0, cu.Stream{}, []unsafe.Pointer{unsafe.Pointer(&rp), unsafe.Pointer(&op), unsafe.Pointer(&n)}); err != nil {
			return err
		}
		if err := cu.Synchronize(); err != nil {
			return err
		}
		return cu.MemcpyDtoH(unsafe.Pointer(&got[0]), ob, int64(len(got)))
	})
	if err != nil {
		t.Fatal(err)
	}
	bad, nonzero := 0, 0
	for i, r := range ratios {
		for c := range 256 {
			code := fp8.E4M3(c)
			g := fp8.E4M3(got[256*i+c])
			if code.IsNaN() {
				if !g.IsNaN() {
					bad++
					t.Errorf("code %#02x (NaN) at ratio %g: %#02x, want a NaN", c, r, g)
				}
				continue
			}
			want := fp8.ToE4M3(code.Float32()*r, fp8.SatFinite)
			if g != want {
				if bad++; bad <= 10 {
					t.Errorf("code %#02x (%g) at ratio %g: %#02x (%g), want %#02x (%g)", c, code.Float32(), r, g, g.Float32(), want, want.Float32())
				}
			}
			if want&0x7F != 0 {
				nonzero++
			}
		}
	}
	t.Logf("%d ratios, 256 codes each: %d results not a zero", len(ratios), nonzero)
	if bad > 0 {
		t.Errorf("%d of %d codes differ from fp8.ToE4M3(value·r)", bad, len(got))
	}
}
