//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
)

// device is one GPU with its primary context, a stream, the loaded kernels
// and a pool of device memory. It is safe for use from many goroutines:
// calls take the device's lock and bind its context to the calling OS
// thread for their duration, with no goroutine hops.
//
// All device work of a device is ordered on its one stream: uploads, the
// kernels, downloads (copies and memsets are asynchronous on it). A freed
// buffer goes back to the pool only once an event recorded after its last
// use on the stream has completed.
type device struct {
	Ordinal int
	Name    string
	// ComputeCapability is major*10 + minor (89 for an L4, 90 for an H200).
	ComputeCapability int

	mu     sync.Mutex
	ctx    C.CUcontext
	stream cu.Stream
	mod    cu.Module
	fns    map[[2]int]C.CUfunction // (stage, d)
	// The Hopper module (stage 9), loaded on compute capability 9.0; where
	// it is not, hopperErr says why (wrapping ErrUnsupported).
	hmod   cu.Module
	hopper map[int]hopperKernels // by head dim
	// hopperMerge merges the parts of a key-split launch (fp8attn_merge9,
	// one for every head dim; split.go).
	hopperMerge C.CUfunction
	quantPack   quantPackGeometry // quant_pack9's, as the module exports it
	quantLong   quantLongGeometry // its long form's (quant_pack9l)
	hopperErr   error
	// The Ada kernel (stage 10, in mod) by head dim; empty where the GPU
	// lacks FP8 mma.sync, and fp8mmaErr says why (stages 7, 8, 10).
	ada       map[int]adaKernels
	fp8mmaErr error
	// The quantization kernels (in mod).
	quant quantKernels
	// The paged-cache module (paged.cu): its sm_90a build on compute
	// capability 9.0, with the warp-specialized kernel; where that build
	// was refused, pagedWSErr says why.
	pmod       cu.Module
	paged      pagedKernels
	pagedWSErr error
	// SMs and SharedPerSM: the multiprocessors and the shared memory each
	// has, for the launchers' grids.
	SMs, SharedPerSM int
	// headStartBlocks is the most blocks a tiled tensor-form grid may have
	// to take the head start (launchTensors): the SMs, one wave. Tests
	// move it to run both ways on any GPU.
	headStartBlocks int
	// splitsForced, where positive, is the number of parts every tiled
	// tensor-form launch divides its blocks' key tiles into (split.go),
	// whatever the plan: tests run the split on shapes it would not take.
	splitsForced int
	// narrowForced runs every masked tiled tensor-form launch that the
	// narrow form can take on it (launchTensors), whatever narrowPlan says:
	// tests run the narrow blocks on shapes it would not give them.
	narrowForced bool
	// stage is the page-locked buffer small transfers go through
	// (staging.go); stageDone is recorded after the last copy that read it.
	stage     []byte
	stageDone cu.Event
	// sinks are the attention sink arrays calls passed (sinks.go).
	sinks     sinkStore
	stageBusy bool
	// hostScales holds the scales a host-slice call computes on the host
	// (host.go), reused call after call.
	hostScales []float32
	hostAcc    []headAcc
	// hostCall is the last host-slice call's device side, kept for the
	// next call of its key (host.go); trimPool gives its memory back to
	// the pool, Close frees it with the rest.
	hostCall *hostCall
	pool     map[int64][]cu.DevicePtr
	pending  []pendingFree // freed, waiting for their event
	events   []cu.Event    // completed events, for reuse
	// owned is every allocation of the device's memory (pool buffers and
	// paged caches' pages) with its size; held is their sum, limit its
	// bound (0: none).
	owned       map[cu.DevicePtr]int64
	held, limit int64
	closed      bool
	// capture is the graph capture in progress (graph.go), nil when none:
	// set and cleared under mu, read without it by do.
	capture atomic.Pointer[captureState]
}

var (
	devicesMu sync.Mutex
	devices   = map[int]*device{}
)

// openDevice returns the device for a GPU ordinal, creating it (retaining
// the primary context, loading the PTX, checking every kernel's compiled
// tile configuration against Tiles) on first use. The PTX is the embedded
// one (a kernel development build may read FP8ATTN_PTX's file instead:
// overrides_kerneldev.go).
func openDevice(ordinal int) (*device, error) {
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if d, ok := devices[ordinal]; ok && !d.closed {
		return d, nil
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: no CUDA device %d (%d present)", backend.ErrUnsupported, ordinal, n)
	}
	d := &device{Ordinal: ordinal, fns: map[[2]int]C.CUfunction{}, pool: map[int64][]cu.DevicePtr{}, hopper: map[int]hopperKernels{},
		ada: map[int]adaKernels{}, owned: map[cu.DevicePtr]int64{}}
	if err := d.init(); err != nil {
		return nil, err
	}
	devices[ordinal] = d
	return d, nil
}

// init retains the device's primary context, reads its attributes, makes
// its stream, and loads its kernel modules (loadModules).
func (d *device) init() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := retainPrimary(d.Ordinal)
	if err != nil {
		return err
	}
	d.ctx = ctx
	if err := setCurrent(ctx); err != nil {
		return err
	}
	dev, err := cu.GetDevice(d.Ordinal)
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	d.Name, _ = dev.Name()
	major, err1 := dev.Attribute(cu.ComputeCapabilityMajor)
	minor, err2 := dev.Attribute(cu.ComputeCapabilityMinor)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	d.ComputeCapability = 10*major + minor
	sms, err1 := dev.Attribute(cu.MultiprocessorCount)
	shm, err2 := dev.Attribute(cu.MaxSharedMemoryPerMultiprocessor)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	d.SMs, d.SharedPerSM = sms, shm
	d.headStartBlocks = sms
	if d.ComputeCapability < 80 {
		return fmt.Errorf("%w: %s is sm_%d; the kernels need sm_80 or newer", backend.ErrUnsupported, d.Name, d.ComputeCapability)
	}
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("cuda: stream: %w", err)
	}
	if d.stageDone, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return fmt.Errorf("cuda: event: %w", err)
	}
	return d.loadModules()
}

// do runs fn with the device's context current on this OS thread.
func (d *device) do(fn func() error) error {
	if d.capturing() != nil { // the capturing goroutine: it holds mu on this thread
		return fn()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("cuda: device is closed")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setCurrent(d.ctx); err != nil {
		return err
	}
	return fn()
}

// Close waits for the device's stream, frees its memory and events, and
// releases its context. Residents must not be used afterwards.
func (d *device) Close() error {
	if d.capturing() != nil {
		return errCapture("closing the device")
	}
	err := d.do(func() error {
		errs := []error{d.stream.Synchronize()}
		for _, pf := range d.pending {
			errs = append(errs, cu.DestroyEvent(&pf.ev))
		}
		for i := range d.events {
			errs = append(errs, cu.DestroyEvent(&d.events[i]))
		}
		d.pending, d.events, d.hostCall = nil, nil, nil
		errs = append(errs, cu.DestroyEvent(&d.stageDone), hostFree(d.stage), d.sinks.close())
		d.stage = nil
		for p := range d.owned {
			errs = append(errs, d.devFree(p))
		}
		errs = append(errs, d.stream.Destroy(), releasePrimary(d.Ordinal))
		return errors.Join(errs...)
	})
	d.closed = true
	devicesMu.Lock()
	delete(devices, d.Ordinal)
	devicesMu.Unlock()
	return err
}

// stageCapability is the compute capability bestStage chooses for: the
// device's, or 80 where the Ampere build is loaded (forceCompute80).
func (d *device) stageCapability() int {
	if d.fp8mmaErr != nil {
		return min(d.ComputeCapability, 80)
	}
	return d.ComputeCapability
}
