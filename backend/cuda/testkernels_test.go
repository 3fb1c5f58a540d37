//go:build cuda

package cuda

import (
	_ "embed"
	"errors"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// The test modules (kernels/testkernels.cu, kernels/testkernels_sm90a.cu,
// built by gen.sh): kernels only the tests launch, embedded here and not in
// the production modules. A kernel development build may read them from
// the files FP8ATTN_TEST_PTX and FP8ATTN_TEST_CUBIN name
// (scripts/gpu-mutants.sh).
var (
	//go:embed kernels/testkernels_compute_80.ptx
	testPTX string
	//go:embed kernels/testkernels_sm_90a.cubin
	testCubin string
)

// encodeCheckParams mirrors EncodeCheckParams (kernels/testkernels_sm90a.cu),
// fp8attn_encode_check's.
type encodeCheckParams struct {
	Amax, Result uint64
	N            int32
}

// testLayouts are the sm_90a test module's parameter blocks, checked when
// it loads.
var testLayouts = []layoutCheck{{"fp8attn_encode_check_params_layout", structLayout[encodeCheckParams]()}}

// testModule loads a test module into d's context, unloaded when the test
// ends: with sm90a the sm_90a cubin (its layouts checked; the test is
// skipped where the Hopper module is not loaded), else the compute_80 PTX,
// which every GPU the backend runs on JIT-compiles.
func testModule(t testing.TB, d *device, sm90a bool) cu.Module {
	t.Helper()
	env, embedded := "FP8ATTN_TEST_PTX", testPTX
	if sm90a {
		if d.hopperErr != nil {
			t.Skipf("no sm_90a module here: %v", d.hopperErr)
		}
		env, embedded = "FP8ATTN_TEST_CUBIN", testCubin
	}
	image, err := moduleImage(env, embedded)
	if err != nil {
		t.Fatal(err)
	}
	if len(image) == 0 {
		t.Fatal("the test module is empty: run go generate ./backend/cuda/kernels on a machine with nvcc")
	}
	var mod cu.Module
	if err := d.do(func() error {
		if mod, err = cu.LoadData(image); err != nil {
			return err
		}
		if sm90a {
			if err := d.checkLayouts(mod, testLayouts); err != nil {
				return errors.Join(err, mod.Unload())
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("loading the test module: %v", err)
	}
	t.Cleanup(func() {
		if err := d.do(mod.Unload); err != nil {
			t.Errorf("unloading the test module: %v", err)
		}
	})
	return mod
}

// encodeCheck runs the sm_90a test module's fp8attn_encode_check over the
// n float32 amax values in amax, its mismatch counts and examples into
// result (2n words, zeroed by the caller), on d's stream.
func encodeCheck(d *device, mod cu.Module, amax, result *buffer, n int) error {
	fn, err := mod.Function("fp8attn_encode_check")
	if err != nil {
		return err
	}
	p := &encodeCheckParams{Amax: uint64(amax.buf.p), Result: uint64(result.buf.p), N: int32(n)}
	return d.do(func() error { return launchStruct(cFunction(fn), 8*d.SMs, 1, 1, 256, 0, d.stream, unsafe.Pointer(p)) })
}
