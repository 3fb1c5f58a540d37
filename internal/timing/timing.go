// Package timing holds the interfaces through which a backend reports its
// kernels' device time to the benchmark tool (cmd/sdpabench). They are
// plumbing between the two, no part of the backend contract.
package timing

import "github.com/fp8attn/fp8attn/backend"

// Timer is implemented by backends that can time their kernels on the
// device. DeviceTimes runs p about iters times and returns per-call device
// times in microseconds, from CUDA-graph replay (launch overhead out, as
// the PyTorch and Triton scripts in bench/ measure).
type Timer interface {
	DeviceTimes(p *backend.Problem, iters int) ([]float64, error)
}

// LaunchTimer is implemented by backends that can also time launches
// issued back to back from the host (launch overhead in, where a kernel is
// shorter than a launch). Same units as Timer.
type LaunchTimer interface {
	LaunchTimes(p *backend.Problem, iters int) ([]float64, error)
}

// PagedTimer is implemented by paged storages on devices that time their
// attention kernels: per-call device time in microseconds, one figure per
// batch of calls, in CUDA-graph replay (as Timer). p is staged on the
// device once; its Out and LSE are not written.
type PagedTimer interface {
	PagedTimes(p *backend.PagedProblem, iters int) ([]float64, error)
}
