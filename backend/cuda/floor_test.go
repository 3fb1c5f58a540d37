//go:build cuda

package cuda

import (
	"fmt"
	"testing"
	"unsafe"
)

// BenchmarkDeviceLaunchFloor times, per call in CUDA-graph replay (as the
// attention benchmarks do), a kernel that does nothing: the sm_90a test
// module's fp8attn_encode_check with no amax values, which passes
// pdl_entry (launch_dependents, then griddepcontrol.wait) and returns. Its
// grids are those of the mission call's forms (64 blocks of 256 threads
// for the one-tile form; 128 for a form of two blocks a query block), one
// block, and more blocks than the H200's 132 SMs; each as a programmatic
// dependent launch (pdl) and as a plain one. The figures bound from below
// what any kernel of that grid costs a call in a graph of back-to-back
// calls (the mission call's target is 2.5 µs: docs/BENCHMARKS.md).
func BenchmarkDeviceLaunchFloor(b *testing.B) {
	d := hopperDevice(b)
	fn, err := testModule(b, d, true).Function("fp8attn_encode_check")
	if err != nil {
		b.Fatal(err)
	}
	f := cFunction(fn)
	markPDL(f) // it keeps pdl.cuh's contract (pdl_entry)
	p := &encodeCheckParams{N: 0}
	defer pdlOn.Store(pdlOn.Load())
	for _, pdl := range []bool{true, false} {
		for _, blocks := range []int{1, 64, 128, 264} {
			b.Run(fmt.Sprintf("blocks%d/pdl=%v", blocks, pdl), func(b *testing.B) {
				pdlOn.Store(pdl)
				var times []float64
				if err := d.do(func() (err error) {
					times, err = d.timeCalls(max(b.N, 200), true, func() error {
						return launchStruct(f, blocks, 1, 1, 256, 0, d.stream, unsafe.Pointer(p))
					})
					return err
				}); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(median(times), "us/call")
			})
		}
	}
}
