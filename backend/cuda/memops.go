//go:build cuda

package cuda

/*
#include <cuda.h>

// The v2 stream memory operations (CUDA 11.7 on; the v1 ones needed a
// kernel-module parameter): a 32-bit write the stream makes once the work
// before it has completed, after a system-wide fence (so that a host that
// sees the value sees what that work wrote), and a wait that holds the
// stream until a word reaches a value.
static CUresult fp8attn_write_value(CUstream s, CUdeviceptr addr, cuuint32_t v) {
	return cuStreamWriteValue32_v2(s, addr, v, CU_STREAM_WRITE_VALUE_DEFAULT);
}
static CUresult fp8attn_wait_value(CUstream s, CUdeviceptr addr, cuuint32_t v) {
	return cuStreamWaitValue32_v2(s, addr, v, CU_STREAM_WAIT_VALUE_GEQ);
}
static CUresult fp8attn_stream_query(CUstream s) {
	CUresult r = cuStreamQuery(s);
	return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
}
static CUresult fp8attn_host_device_ptr(CUdeviceptr* d, void* p) {
	return cuMemHostGetDevicePointer(d, p, 0);
}
*/
import "C"

import (
	"unsafe"

	"gorgonia.org/cu"
)

// streamWrite queues on s the write of v to the word at addr (device
// memory, or page-locked host memory by its device address), behind the
// work queued before it.
func streamWrite(s cu.Stream, addr cu.DevicePtr, v uint32) error {
	return check("cuStreamWriteValue32", C.fp8attn_write_value(cStream(s), C.CUdeviceptr(addr), C.cuuint32_t(v)))
}

// streamWait queues on s a wait until the word at addr, read as a signed
// difference, reaches v (int32(*addr - v) >= 0): the work queued after it
// starts once it does.
func streamWait(s cu.Stream, addr cu.DevicePtr, v uint32) error {
	return check("cuStreamWaitValue32", C.fp8attn_wait_value(cStream(s), C.CUdeviceptr(addr), C.cuuint32_t(v)))
}

// streamQuery returns the error of a failed stream s (one whose work, or
// the context's, failed), nil while it runs or is idle.
func streamQuery(s cu.Stream) error {
	return check("cuStreamQuery", C.fp8attn_stream_query(cStream(s)))
}

// hostDevicePtr is the device's address of page-locked host memory b.
func hostDevicePtr(b []byte) (cu.DevicePtr, error) {
	var d C.CUdeviceptr
	if err := check("cuMemHostGetDevicePointer", C.fp8attn_host_device_ptr(&d, unsafe.Pointer(&b[0]))); err != nil {
		return 0, err
	}
	return cu.DevicePtr(d), nil
}
