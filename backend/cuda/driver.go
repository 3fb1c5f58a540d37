//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// One kernel parameter: the Params block, passed by value. cuLaunchKernel
// copies its bytes before returning, so params may point to Go memory (it
// holds no Go pointers).
static CUresult fp8attn_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               CUstream s, void* params) {
	void* args[1] = {params};
	return cuLaunchKernel(f, gx, gy, gz, bx, 1, 1, 0, s, args, NULL);
}

static CUresult fp8attn_primary_ctx(int ordinal, CUcontext* ctx) {
	CUdevice d;
	CUresult r = cuDeviceGet(&d, ordinal);
	if (r != CUDA_SUCCESS) return r;
	return cuDevicePrimaryCtxRetain(ctx, d);
}

static CUresult fp8attn_release_primary(int ordinal) {
	CUdevice d;
	CUresult r = cuDeviceGet(&d, ordinal);
	if (r != CUDA_SUCCESS) return r;
	return cuDevicePrimaryCtxRelease(d);
}

static const char* fp8attn_error_name(CUresult r) {
	const char* s = 0;
	cuGetErrorName(r, &s);
	return s ? s : "unknown CUDA error";
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The driver calls gorgonia.org/cu v0.9.6 lacks: the primary context and a
// launch that passes one struct by value (cu.Function.Launch copies every
// parameter as 8 bytes and mallocs per launch).

func check(what string, r C.CUresult) error {
	if r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuda: %s: %s (%d)", what, C.GoString(C.fp8attn_error_name(r)), int(r))
	}
	return nil
}

func retainPrimary(ordinal int) (C.CUcontext, error) {
	var ctx C.CUcontext
	return ctx, check("retain primary context", C.fp8attn_primary_ctx(C.int(ordinal), &ctx))
}

func releasePrimary(ordinal int) error {
	return check("release primary context", C.fp8attn_release_primary(C.int(ordinal)))
}

func setCurrent(ctx C.CUcontext) error { return check("cuCtxSetCurrent", C.cuCtxSetCurrent(ctx)) }

// cFunction and cStream read the driver handles inside gorgonia's wrappers
// (each a struct holding exactly that handle).
func cFunction(f cu.Function) C.CUfunction { return *(*C.CUfunction)(unsafe.Pointer(&f)) }
func cStream(s cu.Stream) C.CUstream       { return *(*C.CUstream)(unsafe.Pointer(&s)) }

func launch(fn C.CUfunction, gx, gy, gz, threads int, s cu.Stream, p *params) error {
	return check("cuLaunchKernel", C.fp8attn_launch(fn, C.uint(gx), C.uint(gy), C.uint(gz), C.uint(threads), cStream(s), unsafe.Pointer(p)))
}
