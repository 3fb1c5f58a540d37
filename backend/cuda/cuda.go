//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cuda/kernels"
)

// Device is one GPU with its primary context, a stream, the loaded kernels
// and a pool of device memory. It is safe for use from many goroutines:
// calls take the device's lock and bind its context to the calling OS
// thread for their duration, with no goroutine hops.
type Device struct {
	Ordinal int
	Name    string
	// ComputeCapability is major*10 + minor (89 for an L4, 90 for an H200).
	ComputeCapability int

	mu     sync.Mutex
	ctx    C.CUcontext
	stream cu.Stream
	mod    cu.Module
	fns    map[[2]int]C.CUfunction // (stage, d)
	pool   map[int64][]cu.DevicePtr
	owned  []cu.DevicePtr
	closed bool
}

var (
	devicesMu sync.Mutex
	devices   = map[int]*Device{}
)

// OpenDevice returns the Device for a GPU ordinal, creating it (retaining
// the primary context, loading the PTX, checking every kernel's compiled
// tile configuration against Tiles) on first use. The PTX is the embedded
// one unless FP8ATTN_PTX names a file (for kernel development).
func OpenDevice(ordinal int) (*Device, error) {
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
	d := &Device{Ordinal: ordinal, fns: map[[2]int]C.CUfunction{}, pool: map[int64][]cu.DevicePtr{}}
	if err := d.init(); err != nil {
		return nil, err
	}
	devices[ordinal] = d
	return d, nil
}

func (d *Device) init() error {
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
	if d.ComputeCapability < 89 {
		return fmt.Errorf("%w: %s is sm_%d; the FP8 kernels need sm_89 or newer", backend.ErrUnsupported, d.Name, d.ComputeCapability)
	}
	ptx := kernels.PTX
	if f := os.Getenv("FP8ATTN_PTX"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("cuda: FP8ATTN_PTX: %w", err)
		}
		ptx = string(b)
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("cuda: loading PTX: %w", err)
	}
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("cuda: stream: %w", err)
	}
	for _, st := range Stages {
		for _, hd := range HeadDims {
			name := KernelName(st, hd)
			fn, err := d.mod.Function(name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", name, err)
			}
			if err := d.checkConfig(st, hd); err != nil {
				return err
			}
			d.fns[[2]int{st, hd}] = cFunction(fn)
		}
	}
	return nil
}

// checkConfig compares a kernel's compiled tile constants with Tiles.
func (d *Device) checkConfig(stage, hd int) error {
	name := KernelName(stage, hd) + "_config"
	ptr, size, err := d.mod.Global(name)
	if err != nil || size != 16 {
		return fmt.Errorf("cuda: %s missing from the PTX: %v", name, err)
	}
	var got [4]int32
	if err := cu.MemcpyDtoH(unsafe.Pointer(&got[0]), ptr, 16); err != nil {
		return fmt.Errorf("cuda: reading %s: %w", name, err)
	}
	want, _ := Tiles(stage, hd)
	if int(got[0]) != want.BlockM || int(got[1]) != want.BlockN || int(got[2]) != want.Threads || int(got[3]) != want.Stages {
		return fmt.Errorf("cuda: %s compiled with tiles %v, Tiles() says %+v", KernelName(stage, hd), got, want)
	}
	return nil
}

// do runs fn with the device's context current on this OS thread.
func (d *Device) do(fn func() error) error {
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

// alloc takes a buffer of at least n bytes from the pool (sizes rounded to
// powers of two) or from cuMemAlloc. Never managed memory.
func (d *Device) alloc(n int64) (cu.DevicePtr, int64, error) {
	size := int64(256)
	for size < n {
		size <<= 1
	}
	if free := d.pool[size]; len(free) > 0 {
		p := free[len(free)-1]
		d.pool[size] = free[:len(free)-1]
		return p, size, nil
	}
	p, err := cu.MemAlloc(size)
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: cuMemAlloc(%d): %w", size, err)
	}
	d.owned = append(d.owned, p)
	return p, size, nil
}

// Close frees the device's memory and releases its context. Residents must
// not be used afterwards.
func (d *Device) Close() error {
	err := d.do(func() error {
		var errs []error
		for _, p := range d.owned {
			errs = append(errs, cu.MemFree(p))
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

// Resident is one problem's tensors on the device: upload once, run many
// times, download when asked.
type Resident struct {
	dev   *Device
	shape backend.Problem // shape, scale, mask; no host data
	// params has an allocation of its own: it holds no Go pointers, so cgo
	// lets the launcher pass its address to the driver.
	params *Params
	bufs   []pooled
	outN   int64
	lse    bool
}

type pooled struct {
	p    cu.DevicePtr
	size int64
}

// Upload copies p's FP8 inputs and scales to the device and reserves its
// output (and LSE, if p.LSE is not nil). p must be a validated FP8E4M3
// problem.
func (d *Device) Upload(p *backend.Problem) (*Resident, error) {
	if err := supports(p, 1); err != nil {
		return nil, err
	}
	r := &Resident{dev: d, shape: *p, params: new(Params), outN: int64(len(p.Out)), lse: p.LSE != nil}
	r.shape.Q8, r.shape.K8, r.shape.V8, r.shape.Out, r.shape.LSE = nil, nil, nil, nil, nil
	err := d.do(func() error {
		put := func(src unsafe.Pointer, n int64) (uint64, error) {
			ptr, size, err := d.alloc(n)
			if err != nil {
				return 0, err
			}
			r.bufs = append(r.bufs, pooled{ptr, size})
			if src != nil {
				if err := cu.MemcpyHtoD(ptr, src, n); err != nil {
					return 0, fmt.Errorf("cuda: upload: %w", err)
				}
			}
			return uint64(ptr), nil
		}
		var b DeviceBuffers
		var err error
		u8 := func(x []uint8) unsafe.Pointer { return unsafe.Pointer(&x[0]) }
		f32 := func(x []float32) unsafe.Pointer { return unsafe.Pointer(&x[0]) }
		if b.Q, err = put(u8(asBytes(p.Q8)), int64(len(p.Q8))); err != nil {
			return err
		}
		if b.K, err = put(u8(asBytes(p.K8)), int64(len(p.K8))); err != nil {
			return err
		}
		if b.V, err = put(u8(asBytes(p.V8)), int64(len(p.V8))); err != nil {
			return err
		}
		if b.QScale, err = put(f32(p.QScale), 4*int64(len(p.QScale))); err != nil {
			return err
		}
		if b.KScale, err = put(f32(p.KScale), 4*int64(len(p.KScale))); err != nil {
			return err
		}
		if b.VScale, err = put(f32(p.VScale), 4*int64(len(p.VScale))); err != nil {
			return err
		}
		if b.Out, err = put(nil, 4*r.outN); err != nil {
			return err
		}
		if r.lse {
			if b.LSE, err = put(nil, 4*int64(len(p.LSE))); err != nil {
				return err
			}
		}
		*r.params = NewParams(p, b)
		return nil
	})
	if err != nil {
		r.Free()
		return nil, err
	}
	return r, nil
}

// Poison fills the device output (and LSE) with backend.PoisonBits, so that
// an element a kernel never writes is recognisable after Download.
func (r *Resident) Poison() error {
	return r.dev.do(func() error {
		err := cu.MemsetD32(cu.DevicePtr(r.params.Out), backend.PoisonBits, r.outN)
		if err == nil && r.lse {
			err = cu.MemsetD32(cu.DevicePtr(r.params.LSE), backend.PoisonBits, int64(r.shape.B*r.shape.Hq*r.shape.Sq))
		}
		return err
	})
}

// Run launches stage's kernel on the device's stream (asynchronously).
func (r *Resident) Run(stage int) error {
	return r.dev.do(func() error { return r.launch(stage) })
}

func (r *Resident) launch(stage int) error {
	tc, err := Tiles(stage, r.shape.D)
	if err != nil {
		return err
	}
	fn := r.dev.fns[[2]int{stage, r.shape.D}]
	gx, gy, gz := tc.Grid(r.shape.Shape)
	return launch(fn, gx, gy, gz, tc.Threads, r.dev.stream, r.params)
}

// Download waits for the launched work, checks its error, and copies the
// output (and LSE) to the host.
func (r *Resident) Download(out, lse []float32) error {
	if int64(len(out)) != r.outN {
		return fmt.Errorf("%w: download into %d elements, output has %d", backend.ErrInvalid, len(out), r.outN)
	}
	return r.dev.do(func() error {
		if err := r.dev.stream.Synchronize(); err != nil {
			return fmt.Errorf("cuda: kernel failed: %w", err)
		}
		if err := cu.MemcpyDtoH(unsafe.Pointer(&out[0]), cu.DevicePtr(r.params.Out), 4*r.outN); err != nil {
			return fmt.Errorf("cuda: download: %w", err)
		}
		if lse != nil && r.lse {
			if err := cu.MemcpyDtoH(unsafe.Pointer(&lse[0]), cu.DevicePtr(r.params.LSE), 4*int64(len(lse))); err != nil {
				return fmt.Errorf("cuda: download: %w", err)
			}
		}
		return nil
	})
}

// Free returns the resident's buffers to the device's pool.
func (r *Resident) Free() {
	r.dev.mu.Lock()
	defer r.dev.mu.Unlock()
	for _, b := range r.bufs {
		r.dev.pool[b.size] = append(r.dev.pool[b.size], b.p)
	}
	r.bufs = nil
}

// Times measures stage's device time per call: batches of `batch`
// launches are issued back to back between two CUDA events, iters/batch
// times, and each batch's time is divided by its size (the same method as
// PyTorch's graph replay in bench/torch_sdpa.py; an event between every
// launch would add its own gap). It returns one figure per batch, in
// microseconds.
func (r *Resident) Times(stage, iters int) ([]float64, error) {
	const batch = 10
	n := max(iters/batch, 5)
	out := make([]float64, n)
	err := r.dev.do(func() error {
		evs := make([]cu.Event, n+1)
		for i := range evs {
			ev, err := cu.MakeEvent(cu.DefaultEvent)
			if err != nil {
				return err
			}
			evs[i] = ev
			defer cu.DestroyEvent(&evs[i])
		}
		for i := 0; i < 10; i++ { // warm up
			if err := r.launch(stage); err != nil {
				return err
			}
		}
		if err := evs[0].Record(r.dev.stream); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			for j := 0; j < batch; j++ {
				if err := r.launch(stage); err != nil {
					return err
				}
			}
			if err := evs[i+1].Record(r.dev.stream); err != nil {
				return err
			}
		}
		if err := evs[n].Synchronize(); err != nil {
			return fmt.Errorf("cuda: kernel failed: %w", err)
		}
		for i := range out {
			ms, err := evs[i].Elapsed(evs[i+1])
			if err != nil {
				return err
			}
			out[i] = ms * 1e3 / batch
		}
		return nil
	})
	return out, err
}

func asBytes[T ~uint8](x []T) []uint8 {
	if len(x) == 0 {
		return []uint8{0}
	}
	return unsafe.Slice((*uint8)(unsafe.Pointer(&x[0])), len(x))
}

// Backend runs one kernel stage (stage 0: BestStage for the problem's shape) on
// device 0, which opens on first use.
type Backend struct {
	name  string
	stage int
}

func (b *Backend) stageFor(p *backend.Problem) int {
	if b.stage == 0 {
		return BestStage(p.Shape)
	}
	return b.stage
}

// Name returns "cuda" or "cuda/stageN".
func (b *Backend) Name() string { return b.name }

// Supports accepts FP8E4M3 problems with D in HeadDims on an sm_89+ GPU.
func (b *Backend) Supports(p *backend.Problem) error {
	if err := supports(p, b.stageFor(p)); err != nil {
		return err
	}
	_, err := OpenDevice(0)
	return err
}

// Attention uploads p, runs the stage, and downloads the result. Outputs
// are poisoned on the device first, so an unwritten element cannot pass.
func (b *Backend) Attention(p *backend.Problem) error {
	d, err := OpenDevice(0)
	if err != nil {
		return err
	}
	r, err := d.Upload(p)
	if err != nil {
		return err
	}
	defer r.Free()
	if err := r.Poison(); err != nil {
		return err
	}
	if err := r.Run(b.stageFor(p)); err != nil {
		return err
	}
	return r.Download(p.Out, p.LSE)
}

// DeviceTimes implements backend.Timer.
func (b *Backend) DeviceTimes(p *backend.Problem, iters int) ([]float64, error) {
	d, err := OpenDevice(0)
	if err != nil {
		return nil, err
	}
	r, err := d.Upload(p)
	if err != nil {
		return nil, err
	}
	defer r.Free()
	return r.Times(b.stageFor(p), iters)
}

func init() {
	backend.Register(&Backend{name: "cuda"}, 20)
	for _, s := range Stages {
		backend.Register(&Backend{name: fmt.Sprintf("cuda/stage%d", s), stage: s}, -1)
	}
}
