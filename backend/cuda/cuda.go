//go:build cuda

package cuda

// #include <cuda.h>
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cuda/kernels"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// Device is one GPU with its primary context, a stream, the loaded kernels
// and a pool of device memory. It is safe for use from many goroutines:
// calls take the device's lock and bind its context to the calling OS
// thread for their duration, with no goroutine hops.
//
// All device work of a Device is ordered on its one stream: uploads, the
// kernels, downloads (copies and memsets are asynchronous on it). A freed
// buffer goes back to the pool only once an event recorded after its last
// use on the stream has completed.
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
	// The Hopper module (stage 9), loaded on compute capability 9.0; where
	// it is not, hopperErr says why (wrapping ErrUnsupported).
	hmod      cu.Module
	hopper    map[int]hopperKernels // by head dim
	quantPack quantPackGeometry     // quant_pack9's, as the module exports it
	hopperErr error
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
	// stage is the page-locked buffer small transfers go through
	// (staging.go); stageDone is recorded after the last copy that read it.
	stage     []byte
	stageDone cu.Event
	stageBusy bool
	pool      map[int64][]cu.DevicePtr
	pending   []pendingFree // freed, waiting for their event
	events    []cu.Event    // completed events, for reuse
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

// hopperKernels are the Hopper module's kernels for one head dim.
type hopperKernels struct {
	cfg                       tiles.HopperConfig
	attn, packQ, packK, packV C.CUfunction
	// quantPack quantizes float32 inputs into the images (quant_pack9);
	// attnFused is the attention after it (its score factors from the
	// scales quant_pack9 wrote).
	quantPack, attnFused C.CUfunction
	// attnOne and attnFusedOne are attn and attnFused in one tile, for the
	// calls cfg.OneTile takes (D 64 only; nil for the other head dims).
	attnOne, attnFusedOne C.CUfunction
	// attnQuantizing is the one-tile form quantizing its own float32
	// inputs, for the fused calls cfg.OneTileQuantizing takes (no
	// quant_pack9 before it; nil where attnOne is).
	attnQuantizing C.CUfunction
}

// hopperLaunch is one attention launch: the entry point, its grid and
// block size, and whether it quantizes its own inputs (a fused call
// without quant_pack9).
type hopperLaunch struct {
	fn         C.CUfunction
	gx, gy, gz int
	threads    int
	quantizes  bool
}

// attention returns the launch of a call of shape s: the fused entry
// (quant_pack9 before it) or not, in one tile where cfg.OneTile says so
// (loadHopper loads those entries for every config OneTile can hold),
// with the grid and block cfg.Launch gives; a fused call that
// cfg.OneTileQuantizing takes runs the one-tile form that quantizes its
// own inputs, in the clusters cfg.QuantizingLaunch gives.
func (k *hopperKernels) attention(s backend.Shape, fused bool) hopperLaunch {
	if fused && k.attnQuantizing != nil && k.cfg.OneTileQuantizing(s.Sq, s.Sk) {
		l := hopperLaunch{fn: k.attnQuantizing, quantizes: true}
		l.gx, l.gy, l.gz, l.threads = k.cfg.QuantizingLaunch(s.B, s.Hq)
		return l
	}
	l := hopperLaunch{fn: k.attn}
	switch one := k.cfg.OneTile(s.Sk); {
	case one && fused:
		l.fn = k.attnFusedOne
	case one:
		l.fn = k.attnOne
	case fused:
		l.fn = k.attnFused
	}
	l.gx, l.gy, l.gz, l.threads = k.cfg.Launch(s.B, s.Hq, s.Sq, s.Sk)
	return l
}

// adaKernels are the Ada kernel and its V image pack for one head dim.
type adaKernels struct {
	cfg         tiles.AdaConfig
	attn, packV C.CUfunction
}

// pendingFree is a set of buffers whose last use on the stream precedes ev.
type pendingFree struct {
	ev   cu.Event
	bufs []pooled
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
	d := &Device{Ordinal: ordinal, fns: map[[2]int]C.CUfunction{}, pool: map[int64][]cu.DevicePtr{}, hopper: map[int]hopperKernels{},
		ada: map[int]adaKernels{}, owned: map[cu.DevicePtr]int64{}}
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
	sms, err1 := dev.Attribute(cu.MultiprocessorCount)
	shm, err2 := dev.Attribute(cu.MaxSharedMemoryPerMultiprocessor)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	d.SMs, d.SharedPerSM = sms, shm
	if d.ComputeCapability < 80 {
		return fmt.Errorf("%w: %s is sm_%d; the kernels need sm_80 or newer", backend.ErrUnsupported, d.Name, d.ComputeCapability)
	}
	// Ampere (sm_80-sm_88) loads the compute_80 build: the stages that
	// decode FP8 to f16 before the MMA.
	ampere := d.ComputeCapability < 89 || forceCompute80
	ptxEnv, ptxEmbedded := "FP8ATTN_PTX", kernels.PTX
	if ampere {
		ptxEnv, ptxEmbedded = "FP8ATTN_PTX80", kernels.PTX80
		d.fp8mmaErr = fmt.Errorf("%w: stages %v use FP8 mma.sync, which needs compute capability 8.9; %s is %d", backend.ErrUnsupported,
			FP8MMAStages, d.Name, d.ComputeCapability)
	}
	ptx, err := moduleImage(ptxEnv, ptxEmbedded)
	if err != nil {
		return err
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("cuda: loading PTX: %w", err)
	}
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("cuda: stream: %w", err)
	}
	if d.stageDone, err = cu.MakeEvent(cu.DisableTiming); err != nil {
		return fmt.Errorf("cuda: event: %w", err)
	}
	if err := d.checkParamsLayout(d.mod); err != nil {
		return err
	}
	if err := d.loadQuant(); err != nil {
		return err
	}
	for _, st := range tiles.Stages {
		if ampere && slices.Contains(FP8MMAStages, st) {
			continue
		}
		for _, hd := range HeadDims {
			name := tiles.KernelName(st, hd)
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
	if !ampere {
		if err := d.loadAda(); err != nil {
			return err
		}
	}
	if err := d.loadPaged(ampere); err != nil {
		return err
	}
	if d.ComputeCapability == 90 && !forceCompute80 {
		// A module that does not load on the GPU it was built for is a
		// failure, not a fallback.
		return d.loadHopper()
	}
	d.hopperErr = fmt.Errorf("%w: the Hopper kernel (stage %d) needs compute capability 9.0; %s is %d", backend.ErrUnsupported,
		tiles.HopperStage, d.Name, d.ComputeCapability)
	return nil
}

// loadHopper loads the sm_90a module (the embedded cubin, or the file
// FP8ATTN_CUBIN names; its PTX if the driver refuses the cubin), checks its
// Params layout and every kernel's geometry against internal/tiles, and
// raises each attention kernel's dynamic shared-memory limit.
func (d *Device) loadHopper() error {
	image, err := moduleImage("FP8ATTN_CUBIN", string(kernels.HopperCubin))
	if err != nil {
		return err
	}
	if len(image) == 0 {
		return errors.New("cuda: no sm_90a cubin embedded (run go generate ./backend/cuda/kernels on a machine with nvcc)")
	}
	// cu.LoadData copies the image with C.CString, which copies every byte
	// (NULs included) and appends one.
	if d.hmod, err = cu.LoadData(image); err != nil {
		var perr error
		if d.hmod, perr = cu.LoadData(kernels.HopperPTX); perr != nil {
			return fmt.Errorf("cuda: loading the sm_90a module: cubin: %v; PTX: %w", err, perr)
		}
	}
	if err := d.checkParamsLayout(d.hmod); err != nil {
		return err
	}
	if err := d.checkLayouts(d.hmod, hopperLayouts); err != nil {
		return err
	}
	for _, hd := range HopperHeadDims {
		cfg, _ := tiles.Hopper(hd)
		var k hopperKernels
		k.cfg = cfg
		type entry struct {
			name string
			fn   *C.CUfunction
		}
		entries := []entry{
			{tiles.KernelName(tiles.HopperStage, hd), &k.attn},
			{fmt.Sprintf("fp8attn_pack9q_d%d", hd), &k.packQ},
			{fmt.Sprintf("fp8attn_pack9k_d%d", hd), &k.packK},
			{fmt.Sprintf("fp8attn_pack9v_d%d", hd), &k.packV},
			{fmt.Sprintf("fp8attn_quantpack9_d%d", hd), &k.quantPack},
			{fmt.Sprintf("fp8attn_stage9f_d%d", hd), &k.attnFused},
		}
		if cfg.OneTile(2 * cfg.BlockN) {
			entries = append(entries,
				entry{fmt.Sprintf("fp8attn_stage9o_d%d", hd), &k.attnOne},
				entry{fmt.Sprintf("fp8attn_stage9fo_d%d", hd), &k.attnFusedOne},
				entry{fmt.Sprintf("fp8attn_stage9qo_d%d", hd), &k.attnQuantizing})
		}
		for _, f := range entries {
			fn, err := d.hmod.Function(f.name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", f.name, err)
			}
			*f.fn = cFunction(fn)
			markPDL(*f.fn) // the sm_90a module's entry points keep kernels/pdl.cuh's contract
		}
		if err := d.checkExported(d.hmod, tiles.KernelName(tiles.HopperStage, hd)+"_config",
			cfg.D, cfg.DK, cfg.BlockM, cfg.BlockN, cfg.Threads, cfg.Ring, cfg.SharedBytes()); err != nil {
			return err
		}
		if k.attnOne != nil {
			if err := errors.Join(
				d.checkExported(d.hmod, fmt.Sprintf("fp8attn_stage9o_d%d_config", hd), tiles.OneTileBlockM, tiles.OneTileThreads),
				d.checkExported(d.hmod, fmt.Sprintf("fp8attn_stage9qo_d%d_config", hd), tiles.OneTileCluster, tiles.OneTileBlockM, tiles.OneTileThreads),
			); err != nil {
				return err
			}
		}
		for _, fn := range []C.CUfunction{k.attn, k.attnFused, k.attnOne, k.attnFusedOne, k.attnQuantizing} {
			if fn == nil {
				continue
			}
			if err := setMaxSharedMemory(fn, cfg.SharedBytes()); err != nil {
				return err
			}
		}
		d.hopper[hd] = k
	}
	g, err := d.global(d.hmod, "fp8attn_quantpack9_config", 3)
	if err != nil {
		return err
	}
	d.quantPack = quantPackGeometry{Threads: int(g[0]), Cluster: int(g[1]), Codes: int(g[2])}
	if t, c := d.quantPack.Threads, d.quantPack.Cluster; t <= 0 || t%32 != 0 || t > 1024 || c <= 0 || c > 8 || d.quantPack.Codes <= 0 {
		return fmt.Errorf("cuda: fp8attn_quantpack9_config %v is not a launchable geometry", g)
	}
	return nil
}

// loadAda finds the Ada kernel (stage 10) and its pack kernel for every
// head dim in the compute_89 module, checks their geometry against
// internal/tiles, and raises the dynamic shared-memory limit where a
// block needs more than the default 48 KB.
func (d *Device) loadAda() error {
	for _, hd := range AdaHeadDims {
		cfg, _ := tiles.Ada(hd)
		k := adaKernels{cfg: cfg}
		for _, f := range []struct {
			name string
			fn   *C.CUfunction
		}{
			{tiles.KernelName(tiles.AdaStage, hd), &k.attn},
			{fmt.Sprintf("fp8attn_pack10v_d%d", hd), &k.packV},
		} {
			fn, err := d.mod.Function(f.name)
			if err != nil {
				return fmt.Errorf("cuda: kernel %s: %w", f.name, err)
			}
			*f.fn = cFunction(fn)
		}
		if err := d.checkExported(d.mod, tiles.KernelName(tiles.AdaStage, hd)+"_config",
			cfg.D, cfg.BlockM(), cfg.BlockN, cfg.Warps, cfg.Ring, cfg.KPitch(), cfg.VPitch(), cfg.SharedBytes()); err != nil {
			return err
		}
		// A block must fit the device's shared memory (less the 1 KB the
		// hardware reserves per block); a head dim that does not is left
		// out (Supports then says ErrUnsupported) rather than failing at
		// launch.
		if cfg.SharedBytes()+1024 > d.SharedPerSM {
			continue
		}
		if cfg.SharedBytes() > 48*1024 {
			if err := setMaxSharedMemory(k.attn, cfg.SharedBytes()); err != nil {
				return err
			}
		}
		d.ada[hd] = k
	}
	return nil
}

// adaMissing explains a head dim the Ada kernel has but this device did
// not load (its block needs more shared memory than an SM has).
func (d *Device) adaMissing(hd int) error {
	cfg, _ := tiles.Ada(hd)
	return fmt.Errorf("%w: stage %d at D=%d needs %d bytes of shared memory a block; %s has %d an SM", backend.ErrUnsupported,
		tiles.AdaStage, hd, cfg.SharedBytes(), d.Name, d.SharedPerSM)
}

// forceCompute80 makes OpenDevice load the compute_80 (Ampere) modules on
// any GPU, so that a test can run them where no Ampere GPU is lent.
var forceCompute80 bool

// forcePagedPTX makes OpenDevice load the paged module's compute_89 PTX on
// compute capability 9.0 instead of its sm_90a cubin (tests: the PTX is
// what an Ada GPU, and a Hopper whose driver refuses the cubin, runs).
var forcePagedPTX bool

// moduleImage returns a module's image: the file the environment variable
// env names (for kernel development: scripts/gpu-run.sh points them at
// freshly built kernels), or the embedded one.
func moduleImage(env, embedded string) (string, error) {
	f := os.Getenv(env)
	if f == "" {
		return embedded, nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("cuda: %s: %w", env, err)
	}
	return string(b), nil
}

// global reads the int32 array module mod exports under name.
func (d *Device) global(mod cu.Module, name string, n int) ([]int32, error) {
	ptr, size, err := mod.Global(name)
	if err != nil || size != int64(4*n) {
		return nil, fmt.Errorf("cuda: %s (%d ints) missing from the module (size %d): %v", name, n, size, err)
	}
	got := make([]int32, n)
	if err := cu.MemcpyDtoH(unsafe.Pointer(&got[0]), ptr, size); err != nil {
		return nil, fmt.Errorf("cuda: reading %s: %w", name, err)
	}
	return got, nil
}

// checkParamsLayout compares the Go params struct with the kernels' Params
// as the kernel compiler laid it out (sizeof, then every field's offset).
func (d *Device) checkParamsLayout(mod cu.Module) error {
	want := paramsLayout()
	got, err := d.global(mod, "fp8attn_params_layout", len(want))
	if err != nil {
		return err
	}
	for i := range want {
		if int(got[i]) != want[i] {
			return fmt.Errorf("cuda: Params layout: the kernels have %v (sizeof, offsets), Go has %v", got, want)
		}
	}
	return nil
}

// checkLayouts compares each parameter-block layout a module exports with
// its Go mirror.
func (d *Device) checkLayouts(mod cu.Module, checks []layoutCheck) error {
	for _, c := range checks {
		got, err := d.global(mod, c.name, len(c.want))
		if err != nil {
			return err
		}
		for i := range c.want {
			if int(got[i]) != c.want[i] {
				return fmt.Errorf("cuda: %s: the kernels have %v (sizeof, offsets), Go has %v", c.name, got, c.want)
			}
		}
	}
	return nil
}

// checkConfig compares a kernel's compiled tile constants with internal/tiles.
func (d *Device) checkConfig(stage, hd int) error {
	c, _ := tiles.Get(stage, hd)
	return d.checkExported(d.mod, tiles.KernelName(stage, hd)+"_config", c.BlockM, c.BlockN, c.Threads, c.Ring)
}

// checkExported reads the geometry array name that mod exports (a
// kernel's *_config, as many ints as want) and compares it with want
// (configError).
func (d *Device) checkExported(mod cu.Module, name string, want ...int) error {
	got, err := d.global(mod, name, len(want))
	if err != nil {
		return err
	}
	return configError(name, got, want)
}

// do runs fn with the device's context current on this OS thread.
func (d *Device) do(fn func() error) error {
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

// alloc takes a buffer of at least n bytes from the pool (sizes rounded to
// powers of two) or from cuMemAlloc. Never managed memory. The caller holds
// d.mu with the context current.
func (d *Device) alloc(n int64) (cu.DevicePtr, int64, error) {
	size := int64(256)
	for size < n {
		size <<= 1
	}
	d.reap()
	if free := d.pool[size]; len(free) > 0 {
		p := free[len(free)-1]
		d.pool[size] = free[:len(free)-1]
		return p, size, nil
	}
	p, err := d.devAlloc(size)
	if err != nil {
		return 0, 0, err
	}
	return p, size, nil
}

// devAlloc is the device's one cuMemAlloc: n bytes, counted in held and
// within limit. Over the limit, or when the driver refuses, it first frees
// the pool's idle buffers, then fails with ErrOutOfMemory. The caller is
// inside do.
func (d *Device) devAlloc(n int64) (cu.DevicePtr, error) {
	if d.limit > 0 && d.held+n > d.limit {
		if err := d.trimPool(); err != nil {
			return 0, err
		}
		if d.held+n > d.limit {
			return 0, fmt.Errorf("%w: cuda: %d bytes more would pass the device memory limit of %d (%d held)", backend.ErrOutOfMemory, n, d.limit, d.held)
		}
	}
	p, err := cu.MemAlloc(n)
	if err != nil {
		if terr := d.trimPool(); terr != nil {
			return 0, errors.Join(err, terr)
		}
		if p, err = cu.MemAlloc(n); err != nil {
			return 0, fmt.Errorf("%w: cuda: cuMemAlloc(%d) with %d held: %v", backend.ErrOutOfMemory, n, d.held, err)
		}
	}
	d.owned[p] = n
	d.held += n
	return p, nil
}

// devFree frees an allocation of devAlloc (after the stream's work: the
// caller has made sure nothing still uses it). Freeing what the device no
// longer owns (after Close) does nothing. The caller is inside do.
func (d *Device) devFree(p cu.DevicePtr) error {
	n, ok := d.owned[p]
	if !ok {
		return nil
	}
	delete(d.owned, p)
	d.held -= n
	return cu.MemFree(p)
}

// trimPool frees the pool's idle buffers (those whose last use has
// completed; the ones still pending stay). The caller is inside do.
func (d *Device) trimPool() error {
	d.reap()
	var errs []error
	for size, free := range d.pool {
		for _, p := range free {
			errs = append(errs, d.devFree(p))
		}
		delete(d.pool, size)
	}
	return errors.Join(errs...)
}

// MemoryHeld returns the bytes of device memory the device holds: its pool
// (buffers in use and idle), its paged caches' pages.
func (d *Device) MemoryHeld() int64 {
	var n int64
	d.do(func() error { n = d.held; return nil })
	return n
}

// SetMemoryLimit bounds MemoryHeld (see devAlloc); n <= 0 removes the bound.
// A bound below what is held frees the idle pool now; memory in use stays.
func (d *Device) SetMemoryLimit(n int64) error {
	return d.do(func() error {
		d.limit = max(n, 0)
		if d.limit > 0 && d.held > d.limit {
			return d.trimPool()
		}
		return nil
	})
}

// reap returns to the pool the freed buffers whose event has completed.
// The caller holds d.mu with the context current.
func (d *Device) reap() {
	kept := d.pending[:0]
	for _, pf := range d.pending {
		if pf.ev.Query() != nil { // CUDA_ERROR_NOT_READY: the stream has not got there
			kept = append(kept, pf)
			continue
		}
		for _, b := range pf.bufs {
			d.pool[b.size] = append(d.pool[b.size], b.p)
		}
		d.events = append(d.events, pf.ev)
	}
	clear(d.pending[len(kept):])
	d.pending = kept
}

// release queues bufs for the pool behind an event recorded now on the
// stream, after every use of them issued so far. The caller holds d.mu with
// the context current.
func (d *Device) release(bufs []pooled) error {
	if c := d.capturing(); c != nil { // the graph being captured uses them
		c.bufs = append(c.bufs, bufs...)
		return nil
	}
	var ev cu.Event
	if n := len(d.events); n > 0 {
		ev, d.events = d.events[n-1], d.events[:n-1]
	} else {
		var err error
		if ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("cuda: event: %w", err)
		}
	}
	if err := ev.Record(d.stream); err != nil {
		return fmt.Errorf("cuda: event record: %w", err)
	}
	d.pending = append(d.pending, pendingFree{ev, bufs})
	return nil
}

// Close waits for the device's stream, frees its memory and events, and
// releases its context. Residents must not be used afterwards.
func (d *Device) Close() error {
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
		d.pending, d.events = nil, nil
		errs = append(errs, cu.DestroyEvent(&d.stageDone), hostFree(d.stage))
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

// Resident is one problem's tensors on the device: upload once, run many
// times, download when asked.
type Resident struct {
	dev   *Device
	shape backend.Problem // shape, scale, mask; no host data
	// params has an allocation of its own: it holds no Go pointers, so cgo
	// lets the launcher pass its address to the driver.
	params *params
	bufs   []pooled
	outN   int64
	lse    bool
	// bad is the device flag of a resident made by NewResident: the score
	// factor kernel's report of a factor beyond backend.MaxScoreFactor (0
	// for Upload's residents, whose factors the host checked).
	bad uint64
	// scores is the score-factor launch of a resident made by NewResident
	// (nil for Upload's): its inputs may change between runs, so every
	// launch recomputes the factors and repacks.
	scores *scoreParams
	// fused marks a resident made by AttentionQuantizing: its Q, K and V
	// buffers hold float32 inputs, which each stage-9 launch quantizes
	// straight into the images (quant_pack9, which also writes the scale
	// buffers) instead of packing codes; the fused attention entry computes
	// the score factors from those scales.
	fused bool
	// images holds, per stage, the device layouts its pack kernels wrote
	// (Q, K, V images; 0 where a stage has none), made on the stage's
	// first launch and kept until Free.
	images map[int][3]uint64
}

type pooled struct {
	p    cu.DevicePtr
	size int64
}

// Upload copies p's FP8 inputs and scales to the device, on the device's
// stream, and reserves its output (and LSE, if p.LSE is not nil). p must be
// a validated FP8E4M3 problem; with QuantizeOnRead, its float32 inputs are
// encoded on the host with its scales on the way (fp8.EncodeE4M3, NoSat:
// the codes fp8.QuantizeE4M3 gives). The inputs go to one device block in
// one copy, staged through page-locked memory when small (the codes are
// encoded straight into it). The host slices may be reused once Upload
// returns.
func (d *Device) Upload(p *backend.Problem) (*Resident, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: cuda: uploading a nil problem", backend.ErrInvalid)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := supportsInputs(p); err != nil {
		return nil, err
	}
	r := &Resident{dev: d, shape: *p, params: new(params), outN: int64(len(p.Out)), lse: p.LSE != nil}
	scores := scoreScales(p)
	r.shape.Q, r.shape.K, r.shape.V = nil, nil, nil
	r.shape.Q8, r.shape.K8, r.shape.V8, r.shape.Out, r.shape.LSE = nil, nil, nil, nil, nil
	in := uploadLayout(p, scores)
	err := d.do(func() error {
		var b deviceBuffers
		// put reserves n bytes of device memory (an output).
		put := func(n int64) (uint64, error) {
			ptr, size, err := d.alloc(n)
			if err != nil {
				return 0, err
			}
			r.bufs = append(r.bufs, pooled{ptr, size})
			return uint64(ptr), nil
		}
		base, err := put(int64(in.total))
		if err != nil {
			return err
		}
		for i, dst := range []*uint64{&b.Q, &b.K, &b.V, &b.QScale, &b.KScale, &b.VScale, &b.ScoreScale} {
			*dst = base + uint64(in.off[i])
		}
		if b.Out, err = put(4 * r.outN); err != nil {
			return err
		}
		if r.lse {
			if b.LSE, err = put(4 * int64(len(p.LSE))); err != nil {
				return err
			}
		}
		*r.params = newParams(p, b)
		return d.uploadInputs(cu.DevicePtr(base), in)
	})
	if err != nil {
		r.Free()
		return nil, err
	}
	return r, nil
}

// Poison fills the device output (and LSE) with backend.PoisonBits, on the
// stream, so that an element a kernel never writes is recognisable after
// Download. Tests use it; production calls do not.
func (r *Resident) Poison() error {
	return r.dev.do(func() error {
		err := cu.MemsetD32Async(cu.DevicePtr(r.params.Out), backend.PoisonBits, r.outN, r.dev.stream)
		if err == nil && r.lse {
			err = cu.MemsetD32Async(cu.DevicePtr(r.params.LSE), backend.PoisonBits, int64(r.shape.B*r.shape.Hq*r.shape.Sq), r.dev.stream)
		}
		return err
	})
}

// Run launches stage's kernel on the device's stream (asynchronously).
func (r *Resident) Run(stage int) error {
	return r.dev.do(func() error { return r.launch(stage) })
}

func (r *Resident) launch(stage int) error {
	tc, err := geometry(stage, r.shape.D)
	if err != nil {
		return err
	}
	if len(r.bufs) == 0 {
		return errors.New("cuda: resident used after Free")
	}
	if r.fused && stage != tiles.HopperStage {
		return fmt.Errorf("%w: cuda: float32 inputs quantized on launch run on stage %d only", backend.ErrUnsupported, tiles.HopperStage)
	}
	if r.scores != nil && !r.fused {
		if err := r.launchScores(); err != nil {
			return err
		}
	}
	s := r.shape
	switch stage {
	case tiles.HopperStage:
		if r.dev.hopperErr != nil {
			return r.dev.hopperErr
		}
		k := r.dev.hopper[s.D]
		b, hq, hkv := int64(s.B), int64(s.Hq), int64(s.Hkv)
		sizes := [3]int64{b * hq * int64(k.cfg.QImageBytes(s.Sq)), b * hkv * int64(k.cfg.KImageBytes(s.Sk)), b * hkv * int64(k.cfg.VImageBytes(s.Sk))}
		fns := [3]C.CUfunction{k.packQ, k.packK, k.packV}
		if r.fused {
			fns = [3]C.CUfunction{}
		}
		l := k.attention(s.Shape, r.fused)
		if l.quantizes { // its codes stay in shared memory: no images
			sizes = [3]int64{}
		}
		if err := r.pack(stage, sizes, fns); err != nil {
			return err
		}
		if r.fused {
			fp := r.fusedParams()
			if !l.quantizes {
				if err := r.launchQuantPack(k.quantPack, fp); err != nil {
					return err
				}
			}
			return launchStruct(l.fn, l.gx, l.gy, l.gz, l.threads, k.cfg.SharedBytes(), r.dev.stream, unsafe.Pointer(fp))
		}
		return launch(l.fn, l.gx, l.gy, l.gz, l.threads, k.cfg.SharedBytes(), r.dev.stream, r.params)
	case tiles.AdaStage:
		if r.dev.fp8mmaErr != nil {
			return r.dev.fp8mmaErr
		}
		k, ok := r.dev.ada[s.D]
		if !ok {
			return r.dev.adaMissing(s.D)
		}
		sizes := [3]int64{0, 0, int64(s.B) * int64(s.Hkv) * int64(k.cfg.VImageBytes(s.Sk))}
		if err := r.pack(stage, sizes, [3]C.CUfunction{nil, nil, k.packV}); err != nil {
			return err
		}
		gx, gy, gz := k.cfg.Grid(s.B, s.Hkv, s.Group(), s.Sq)
		return launch(k.attn, gx, gy, gz, tc.Threads, k.cfg.SharedBytes(), r.dev.stream, r.params)
	}
	if r.dev.fp8mmaErr != nil && slices.Contains(FP8MMAStages, stage) {
		return r.dev.fp8mmaErr
	}
	gx, gy, gz := tc.Grid(s.B, s.Hq, s.Sq)
	return launch(r.dev.fns[[2]int{stage, s.D}], gx, gy, gz, tc.Threads, 0, r.dev.stream, r.params)
}

// pack lays the resident's inputs out for stage on the device: the pack
// kernels (one per image with a nonzero size; one thread per 16 image
// bytes, 256 a block) write the Q, K and V images, which stay with the
// resident until Free; once for Upload's residents, at every launch for
// NewResident's (whose inputs may change); a nil kernel only allocates its
// image (quant_pack9 fills them). It leaves the stage's images in the
// params block. The caller holds d.mu with the context current.
func (r *Resident) pack(stage int, sizes [3]int64, fns [3]C.CUfunction) error {
	imgs, ok := r.images[stage]
	r.params.QImage, r.params.KImage, r.params.VImage = imgs[0], imgs[1], imgs[2]
	if ok && r.scores == nil { // inputs that cannot change: packed once
		return nil
	}
	for i, n := range sizes {
		if n == 0 || ok {
			continue
		}
		p, size, err := r.dev.alloc(n)
		if err != nil {
			return err
		}
		r.bufs = append(r.bufs, pooled{p, size})
		imgs[i] = uint64(p)
	}
	r.params.QImage, r.params.KImage, r.params.VImage = imgs[0], imgs[1], imgs[2]
	for i, fn := range fns {
		if sizes[i] == 0 || fn == nil { // (no pack kernels: quant_pack9 writes the images)
			continue
		}
		if err := launch(fn, int((sizes[i]/16+255)/256), 1, 1, 256, 0, r.dev.stream, r.params); err != nil {
			return err
		}
	}
	if r.images == nil {
		r.images = map[int][3]uint64{}
	}
	r.images[stage] = imgs
	return nil
}

// Download copies the output (and LSE, when lse is not nil and the problem
// has one) to the host behind the launched work on the stream, waits for it,
// and reports a kernel's failure.
func (r *Resident) Download(out, lse []float32) error {
	if int64(len(out)) != r.outN {
		return fmt.Errorf("%w: download into %d elements, output has %d", backend.ErrInvalid, len(out), r.outN)
	}
	nlse := r.shape.B * r.shape.Hq * r.shape.Sq
	if lse != nil && r.lse && len(lse) != nlse {
		return fmt.Errorf("%w: download LSE into %d elements, LSE has %d", backend.ErrInvalid, len(lse), nlse)
	}
	return r.dev.do(func() error {
		if len(r.bufs) == 0 {
			return errors.New("cuda: resident used after Free")
		}
		copies := []hostCopy{{cu.DevicePtr(r.params.Out), bytesOf(out)}}
		if lse != nil && r.lse {
			copies = append(copies, hostCopy{cu.DevicePtr(r.params.LSE), bytesOf(lse)})
		}
		var bad [1]int32
		if r.bad != 0 {
			copies = append(copies, hostCopy{cu.DevicePtr(r.bad), bytesOf(bad[:])})
		}
		if err := r.dev.download(copies); err != nil {
			return err
		}
		return factorError(bad[0], r.shape.Hq)
	})
}

// Free hands the resident's buffers back: they return to the device's pool
// once the work issued on them so far has completed on the stream. A
// resident must not be used after Free; a second Free does nothing.
func (r *Resident) Free() error {
	return r.dev.do(func() error {
		if len(r.bufs) == 0 {
			return nil
		}
		bufs := r.bufs
		r.bufs = nil
		return r.dev.release(bufs)
	})
}

// Times measures stage's device time per call, in microseconds, one figure
// per batch of calls (see Device.timeCalls); warm-up launches (which also
// pack the Hopper kernel's inputs) come first.
func (r *Resident) Times(stage, iters int, graphed bool) ([]float64, error) {
	var out []float64
	err := r.dev.do(func() error {
		var err error
		out, err = r.dev.timeCalls(iters, graphed, func() error { return r.launch(stage) })
		return err
	})
	return out, err
}

// timeCalls measures the device time of one call (the work call issues on
// the stream), in microseconds, one figure per batch of 10 calls, after 10
// warm-up calls. With graphed, a batch is captured once in a CUDA graph and
// the graph is replayed between CUDA events, so that host launch overhead
// stays out (the method of the PyTorch and Triton scripts in bench/).
// Without, the batch is launched back to back between events (launch
// overhead included where the kernel is shorter than a launch). The caller
// holds d.mu with the context current (inside do).
func (d *Device) timeCalls(iters int, graphed bool, call func() error) ([]float64, error) {
	const batch = 10
	n := max(iters/batch, 5)
	out := make([]float64, n)
	evs := make([]cu.Event, n+1)
	for i := range evs {
		ev, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return nil, err
		}
		evs[i] = ev
		defer cu.DestroyEvent(&evs[i])
	}
	for i := 0; i < 10; i++ { // warm up
		if err := call(); err != nil {
			return nil, err
		}
	}
	issue := func() error {
		for j := 0; j < batch; j++ {
			if err := call(); err != nil {
				return err
			}
		}
		return nil
	}
	if graphed {
		g, err := capture(d.stream, issue)
		if err != nil {
			return nil, err
		}
		defer g.destroy()
		issue = func() error { return g.launch(d.stream) }
		if err := issue(); err != nil { // the graph's first replay uploads it
			return nil, err
		}
	}
	if err := evs[0].Record(d.stream); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		if err := issue(); err != nil {
			return nil, err
		}
		if err := evs[i+1].Record(d.stream); err != nil {
			return nil, err
		}
	}
	if err := evs[n].Synchronize(); err != nil {
		return nil, fmt.Errorf("cuda: kernel failed: %w", err)
	}
	for i := range out {
		ms, err := evs[i].Elapsed(evs[i+1])
		if err != nil {
			return nil, err
		}
		out[i] = ms * 1e3 / batch
	}
	return out, nil
}

// Backend runs one kernel stage (stage 0: BestStage for the problem's shape) on
// device 0, which opens on first use.
type Backend struct {
	name  string
	stage int
	// poison makes every call fill the device outputs with
	// backend.PoisonBits before the kernel runs, so that an element the
	// kernel never writes cannot pass a test (pooled buffers hold earlier
	// results). Tests set it; the registered backends do not.
	poison bool
	// pagedCpAsync makes its paged caches run the cp.async attention kernel
	// where the warp-specialized one would (tests run both).
	pagedCpAsync bool
	// pagedWSBlocks, if positive, makes its paged caches run the
	// warp-specialized kernel on every call, on at most that many blocks,
	// so that each block walks several units (tests).
	pagedWSBlocks int
}

// stageFor opens device 0 and returns the stage to run p with.
func (b *Backend) stageFor(p *backend.Problem) (*Device, int, error) {
	d, err := OpenDevice(0)
	if err != nil {
		return nil, 0, err
	}
	if b.stage == 0 {
		return d, BestStage(p.Shape, d.stageCapability()), nil
	}
	return d, b.stage, nil
}

// stageCapability is the compute capability BestStage chooses for: the
// device's, or 80 where the Ampere build is loaded (forceCompute80).
func (d *Device) stageCapability() int {
	if d.fp8mmaErr != nil {
		return min(d.ComputeCapability, 80)
	}
	return d.ComputeCapability
}

// Name returns "cuda" or "cuda/stageN".
func (b *Backend) Name() string { return b.name }

// Supports accepts FP8E4M3 problems whose head dim the stage has (HeadDims;
// HopperHeadDims for stage 9) on a GPU that loads the stage.
func (b *Backend) Supports(p *backend.Problem) error {
	if b.stage != 0 { // a fixed stage: shape errors without touching the GPU
		if err := supports(p, b.stage); err != nil {
			return err
		}
	}
	d, st, err := b.stageFor(p)
	if err != nil {
		return err
	}
	if b.stage == 0 { // the stage BestStage chose for this GPU
		if err := supports(p, st); err != nil {
			return err
		}
	}
	if st == tiles.HopperStage {
		return d.hopperErr
	}
	if slices.Contains(FP8MMAStages, st) && d.fp8mmaErr != nil {
		return d.fp8mmaErr
	}
	if _, ok := d.ada[p.D]; st == tiles.AdaStage && !ok {
		return d.adaMissing(p.D)
	}
	return nil
}

// QuantizesOnRead reports whether the backend encodes p's float32 inputs
// itself (backend.Problem.QuantizeOnRead): when their codes fit the
// page-locked staging memory, it encodes them straight into it, so no codes
// are written to Go memory and copied again.
func (b *Backend) QuantizesOnRead(p *backend.Problem) bool {
	if p == nil {
		return false
	}
	nq, ok1 := checked.Mul(p.B, p.Hq, p.Sq, p.D)
	nkv, ok2 := checked.Mul(p.B, p.Hkv, p.Sk, p.D)
	return ok1 && ok2 && nq <= stagingMax && nkv <= stagingMax && nq+2*nkv <= stagingMax
}

// Attention uploads p, runs the stage, and downloads the result.
func (b *Backend) Attention(p *backend.Problem) (err error) {
	d, st, err := b.stageFor(p)
	if err != nil {
		return err
	}
	r, err := d.Upload(p)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Free()) }()
	if b.poison {
		if err := r.Poison(); err != nil {
			return err
		}
	}
	if err := r.Run(st); err != nil {
		return err
	}
	return r.Download(p.Out, p.LSE)
}

// DeviceTimes implements backend.Timer: per-call device time in CUDA-graph
// replay.
func (b *Backend) DeviceTimes(p *backend.Problem, iters int) ([]float64, error) {
	return b.times(p, iters, true)
}

// LaunchTimes implements backend.LaunchTimer: per-call device time of
// launches issued back to back.
func (b *Backend) LaunchTimes(p *backend.Problem, iters int) ([]float64, error) {
	return b.times(p, iters, false)
}

func (b *Backend) times(p *backend.Problem, iters int, graphed bool) ([]float64, error) {
	d, st, err := b.stageFor(p)
	if err != nil {
		return nil, err
	}
	r, err := d.Upload(p)
	if err != nil {
		return nil, err
	}
	times, err := r.Times(st, iters, graphed)
	return times, errors.Join(err, r.Free())
}

func init() {
	backend.MustRegister(&Backend{name: "cuda"}, 20)
	for _, s := range Stages {
		backend.MustRegister(&Backend{name: fmt.Sprintf("cuda/stage%d", s), stage: s}, -1)
	}
}
