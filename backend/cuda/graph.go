//go:build cuda

package cuda

/*
#include <pthread.h>

// The calling OS thread (the capture's identity: a goroutine capturing
// has locked its thread, and no other goroutine runs on a locked thread).
static unsigned long long fp8attn_thread(void) { return (unsigned long long)pthread_self(); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
)

// Callers' graphs (backend.Capturer): device.Capture runs an issue function
// with the device's lock held and its stream capturing; the calls issue
// makes from its goroutine pass through do without taking the lock (they
// are on the capturing OS thread), every other goroutine's calls wait for
// the lock. Inside a capture, buffers released go to the graph instead of
// the pool, copies from or to host memory fail, and a paged attention reads
// its lengths and block table from device memory its caller keeps current
// (pagedTables): a replay is one graph launch.

// captureState is what a capture in progress has gathered.
type captureState struct {
	thread uint64
	// bufs is device memory the graph's work uses that no one else owns
	// (temporaries freed inside the capture, per-call scratch): released
	// with the graph.
	bufs []pooled
	// zero are words allocated inside the capture that must start at 0
	// (an output's score-factor flag, zeroWords' counters): cleared on the
	// stream when the capture ends, whether it succeeded or not, and not at
	// every replay (the kernels that use them leave them 0).
	zero []zeroRun
	// pinned buffers and caches may not be freed while the graph lives.
	pinned []*buffer
	caches []*pagedKV
}

// zeroRun is n device words at p.
type zeroRun struct {
	p cu.DevicePtr
	n int64
}

func currentThread() uint64 { return uint64(C.fp8attn_thread()) }

// captures counts the captures in progress on every device, so that the
// backend's Capturing answers without a lock when there are none (sdpa asks
// on every call).
var captures atomic.Int32

// capturing returns the capture the calling goroutine is recording, or nil.
func (d *device) capturing() *captureState {
	c := d.capture.Load()
	if c == nil || c.thread != currentThread() {
		return nil
	}
	return c
}

// errCapture is the error of a call that cannot be captured.
func errCapture(what string) error {
	return fmt.Errorf("%w: cuda: %s inside a graph capture (a graph replays device work only: move host data before Replay)", backend.ErrUnsupported, what)
}

// pin keeps b from being freed while the graph being captured lives. The
// caller is the capturing goroutine.
func (c *captureState) pin(b *buffer) { c.pinned = append(c.pinned, b) }

// own allocates n bytes that belong to the graph being captured. The
// caller is inside do, capturing.
func (d *device) own(c *captureState, n int64) (uint64, error) {
	p, size, err := d.alloc(n)
	if err != nil {
		return 0, err
	}
	c.bufs = append(c.bufs, pooled{p, size})
	return uint64(p), nil
}

// deviceGraph is an instantiated capture of a device's calls (backend.Graph).
type deviceGraph struct {
	dev    *device
	exec   graph
	state  *captureState
	closed bool
}

// Capture implements backend.Capturer on the device: issue's calls from
// this goroutine are recorded into a CUDA graph.
func (d *device) Capture(issue func() error) (g *deviceGraph, err error) {
	if issue == nil {
		return nil, fmt.Errorf("%w: cuda: capturing a nil function", backend.ErrInvalid)
	}
	if d.capturing() != nil {
		return nil, fmt.Errorf("%w: cuda: a capture inside a capture", backend.ErrUnsupported)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("cuda: device is closed")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setCurrent(d.ctx); err != nil {
		return nil, err
	}
	c := &captureState{thread: currentThread()}
	if err := beginCapture(d.stream, true); err != nil {
		return nil, err
	}
	d.capture.Store(c)
	captures.Add(1)
	ended := false
	var exec graph
	end := func() error {
		d.capture.Store(nil)
		captures.Add(-1)
		ended = true
		err := exec.endCapture(d.stream)
		for _, z := range c.zero {
			err = errors.Join(err, cu.MemsetD32Async(z.p, 0, z.n, d.stream))
		}
		return err
	}
	defer func() { // a panic in issue: end the capture, drop what it gathered
		if !ended {
			end()
			if exec.exec != nil {
				exec.destroy()
			}
			d.release(c.bufs)
		}
	}()
	ierr := issue()
	eerr := end()
	if ierr != nil || eerr != nil {
		if eerr == nil {
			eerr = exec.destroy()
		}
		// Nothing ran: the graph's memory can go back now.
		return nil, errors.Join(ierr, eerr, d.release(c.bufs))
	}
	for _, b := range c.pinned {
		if b.buf.p != 0 { // (freed inside the capture: the graph owns it)
			b.pins++
		}
	}
	for _, s := range c.caches {
		s.pins++
	}
	return &deviceGraph{dev: d, exec: exec, state: c}, nil
}

// Capturing implements backend.Capturer.
func (d *device) Capturing() bool { return d.capturing() != nil }

// Replay launches the graph on the stream, without waiting: nothing is
// copied from the host.
func (g *deviceGraph) Replay() error {
	if g == nil || g.dev == nil {
		return fmt.Errorf("%w: cuda: a graph not made by Capture", backend.ErrInvalid)
	}
	return g.dev.do(func() error {
		if g.closed {
			return fmt.Errorf("%w: cuda: graph replayed after Close", backend.ErrInvalid)
		}
		if g.dev.capturing() != nil {
			return errCapture("replaying a graph")
		}
		return g.exec.launch(g.dev.stream)
	})
}

// Close waits for the graph's replays, destroys it, releases its memory
// and unpins its buffers and caches. A second Close does nothing.
func (g *deviceGraph) Close() error {
	if g == nil || g.dev == nil {
		return nil
	}
	return g.dev.do(func() error {
		if g.closed {
			return nil
		}
		if g.dev.capturing() != nil {
			return errCapture("closing a graph")
		}
		g.closed = true
		errs := []error{g.dev.stream.Synchronize(), g.exec.destroy(), g.dev.release(g.state.bufs)}
		for _, b := range g.state.pinned {
			if b.pins > 0 {
				b.pins--
			}
		}
		for _, s := range g.state.caches {
			s.pins--
		}
		g.state = &captureState{}
		return errors.Join(errs...)
	})
}

// Capture implements backend.Capturer on device 0.
func (b *kernelBackend) Capture(issue func() error) (backend.Graph, error) {
	d, err := openDevice(0)
	if err != nil {
		return nil, err
	}
	g, err := d.Capture(issue)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Capturing implements backend.Capturer: whether the calling goroutine is
// capturing on device 0 (false when it is not open).
func (b *kernelBackend) Capturing() bool {
	if captures.Load() == 0 {
		return false
	}
	devicesMu.Lock()
	d := devices[0]
	devicesMu.Unlock()
	return d != nil && d.Capturing()
}
