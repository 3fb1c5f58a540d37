//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <string.h>

// One kernel parameter: the Params block, passed by value. cuLaunchKernel
// copies its bytes before returning, so params may point to Go memory (it
// holds no Go pointers). smem is the dynamic shared memory in bytes.
static CUresult fp8attn_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned smem, CUstream s, void* params) {
	void* args[1] = {params};
	return cuLaunchKernel(f, gx, gy, gz, bx, 1, 1, smem, s, args, NULL);
}

// fp8attn_launch with programmatic stream serialization: f's blocks may be
// scheduled, and run up to their griddepcontrol.wait, before the kernel
// ahead of it in the stream has completed (kernels/pdl.cuh; compute
// capability 9.0 and newer). In a stream capture the edge becomes a
// programmatic one in the graph.
static CUresult fp8attn_launch_pdl(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned smem, CUstream s, void* params) {
	void* args[1] = {params};
	CUlaunchAttribute attr;
	memset(&attr, 0, sizeof attr);
	attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr.value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof cfg);
	cfg.gridDimX = gx;
	cfg.gridDimY = gy;
	cfg.gridDimZ = gz;
	cfg.blockDimX = bx;
	cfg.blockDimY = 1;
	cfg.blockDimZ = 1;
	cfg.sharedMemBytes = smem;
	cfg.hStream = s;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	return cuLaunchKernelEx(&cfg, f, args, NULL);
}

// Lets f use up to bytes of dynamic shared memory (past the default 48 KB).
static CUresult fp8attn_set_max_smem(CUfunction f, int bytes) {
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

// Asks for the largest shared-memory carveout for f (its blocks' shared
// memory before the L1 cache), so that as many of its blocks as their
// shared memory allows fit an SM at once.
static CUresult fp8attn_set_carveout_max(CUfunction f) {
	return cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100);
}

// How many blocks of f, of bx threads and smem bytes of dynamic shared
// memory each, one multiprocessor holds at once, into *n.
static CUresult fp8attn_max_blocks(CUfunction f, int bx, size_t smem, int* n) {
	return cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, bx, smem);
}

// CUDA graphs: capture the work a thread issues on s, instantiate it, replay.
// relaxed: the capturing thread may still allocate device memory and query
// events that are not part of the capture (callers' graphs: the pool does
// both); otherwise thread-local (the benchmarks' graphs).
static CUresult fp8attn_capture_begin(CUstream s, int relaxed) {
	return cuStreamBeginCapture(s, relaxed ? CU_STREAM_CAPTURE_MODE_RELAXED : CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}
static CUresult fp8attn_capture_end(CUstream s, CUgraphExec* exec) {
	CUgraph g;
	CUresult r = cuStreamEndCapture(s, &g);
	if (r != CUDA_SUCCESS) return r;
	r = cuGraphInstantiateWithFlags(exec, g, 0);
	CUresult r2 = cuGraphDestroy(g);
	return r != CUDA_SUCCESS ? r : r2;
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

// Page-locked host memory, for staging copies (the driver DMAs from it
// directly; copies from pageable memory go through its own bounce buffer).
static CUresult fp8attn_host_alloc(void** p, size_t n) { return cuMemHostAlloc(p, n, 0); }

// A copy of height rows of width bytes between two device regions whose
// rows lie spitch and dpitch bytes apart, on s. (gorgonia.org/cu's
// Memcpy2DAsync dereferences its struct's CUDA arrays, nil for device
// pointers.)
static CUresult fp8attn_copy_2d(CUdeviceptr dst, size_t dpitch, CUdeviceptr src, size_t spitch, size_t width,
                                size_t height, CUstream s) {
	CUDA_MEMCPY2D c;
	memset(&c, 0, sizeof c);
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = src;
	c.srcPitch = spitch;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = dst;
	c.dstPitch = dpitch;
	c.WidthInBytes = width;
	c.Height = height;
	return cuMemcpy2DAsync(&c, s);
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
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"
)

// The driver calls gorgonia.org/cu v0.9.6 lacks: the primary context, a
// launch that passes one struct by value with dynamic shared memory
// (cu.Function.Launch copies every parameter as 8 bytes and mallocs per
// launch), cuFuncSetAttribute, CUDA graphs, and device-to-device 2D copies.

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

func launch(fn C.CUfunction, gx, gy, gz, threads, smem int, s cu.Stream, p *params) error {
	return launchStruct(fn, gx, gy, gz, threads, smem, s, unsafe.Pointer(p))
}

// launchStruct launches fn with one parameter, the struct at args (Go
// memory holding no Go pointers; the driver copies it before returning),
// as a programmatic dependent launch where fn keeps pdl.cuh's contract
// (markPDL) and PDL is on.
func launchStruct(fn C.CUfunction, gx, gy, gz, threads, smem int, s cu.Stream, args unsafe.Pointer) error {
	if pdlOn.Load() {
		if _, ok := pdlKernels.Load(fn); ok {
			return check("cuLaunchKernelEx", C.fp8attn_launch_pdl(fn, C.uint(gx), C.uint(gy), C.uint(gz), C.uint(threads), C.uint(smem), cStream(s), args))
		}
	}
	return check("cuLaunchKernel", C.fp8attn_launch(fn, C.uint(gx), C.uint(gy), C.uint(gz), C.uint(threads), C.uint(smem), cStream(s), args))
}

// Programmatic dependent launch (kernels/pdl.cuh). pdlKernels holds the
// functions whose every thread runs griddepcontrol.wait before its first
// global access: the kernels of the sm_90a modules, marked as they load.
// A kernel launched so may start while the one before it in the stream
// drains: its launch and set-up overlap that kernel's tail, which on a
// microsecond kernel in a graph is a visible part of a call
// (docs/design/hopper-prefill.md). pdlOn starts as pdlDefault (on, unless a
// kernel development build is told FP8ATTN_PDL=0); benchmarks switch it for
// A/B runs.
var (
	pdlKernels sync.Map // C.CUfunction → struct{}
	pdlOn      atomic.Bool
)

func init() { pdlOn.Store(pdlDefault()) }

// markPDL records that fn keeps pdl.cuh's contract.
func markPDL(fn C.CUfunction) { pdlKernels.Store(fn, struct{}{}) }

// copy2D copies height rows of width bytes from src, rows spitch bytes
// apart, to dst, rows dpitch bytes apart, device to device, on s.
func copy2D(dst uint64, dpitch int64, src uint64, spitch, width, height int64, s cu.Stream) error {
	return check("cuMemcpy2DAsync", C.fp8attn_copy_2d(C.CUdeviceptr(dst), C.size_t(dpitch), C.CUdeviceptr(src), C.size_t(spitch),
		C.size_t(width), C.size_t(height), cStream(s)))
}

func setMaxSharedMemory(fn C.CUfunction, bytes int) error {
	return check("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", C.fp8attn_set_max_smem(fn, C.int(bytes)))
}

// setCarveoutMax asks for fn's largest shared-memory carveout.
func setCarveoutMax(fn C.CUfunction) error {
	return check("cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)", C.fp8attn_set_carveout_max(fn))
}

// maxActiveBlocks returns how many blocks of fn, of threads a block and
// smem bytes of dynamic shared memory, one multiprocessor holds at once: 0
// where it cannot hold one.
func maxActiveBlocks(fn C.CUfunction, threads, smem int) (int, error) {
	var n C.int
	err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor", C.fp8attn_max_blocks(fn, C.int(threads), C.size_t(smem), &n))
	return int(n), err
}

// hostAlloc returns n bytes of page-locked host memory, as a byte slice
// over C memory (free it with hostFree).
func hostAlloc(n int) ([]byte, error) {
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.fp8attn_host_alloc(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func hostFree(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return check("cuMemFreeHost", C.cuMemFreeHost(unsafe.Pointer(&b[0])))
}

// graph is an instantiated CUDA graph.
type graph struct{ exec C.CUgraphExec }

// capture records the work issue puts on stream s (from this OS thread,
// which the caller has locked) into a graph. Nothing runs during capture.
func capture(s cu.Stream, issue func() error) (graph, error) {
	var g graph
	if err := beginCapture(s, false); err != nil {
		return g, err
	}
	ierr := issue()
	err := g.endCapture(s)
	if ierr != nil {
		if err == nil {
			g.destroy()
		}
		return graph{}, ierr
	}
	return g, err
}

// beginCapture starts capturing stream s (relaxed: see fp8attn_capture_begin).
func beginCapture(s cu.Stream, relaxed bool) error {
	r := 0
	if relaxed {
		r = 1
	}
	return check("cuStreamBeginCapture", C.fp8attn_capture_begin(cStream(s), C.int(r)))
}

// endCapture ends the capture of s and instantiates its graph into g.
func (g *graph) endCapture(s cu.Stream) error {
	return check("cuStreamEndCapture", C.fp8attn_capture_end(cStream(s), &g.exec))
}

func (g graph) launch(s cu.Stream) error {
	return check("cuGraphLaunch", C.cuGraphLaunch(g.exec, cStream(s)))
}

func (g graph) destroy() error { return check("cuGraphExecDestroy", C.cuGraphExecDestroy(g.exec)) }
