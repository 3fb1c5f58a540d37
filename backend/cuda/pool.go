//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
)

// pendingFree is a set of buffers whose last use on the stream precedes ev.
type pendingFree struct {
	ev   cu.Event
	bufs []pooled
}

// alloc takes a buffer of at least n bytes from the pool (sizes rounded to
// powers of two) or from cuMemAlloc. Never managed memory. The caller holds
// d.mu with the context current.
func (d *device) alloc(n int64) (cu.DevicePtr, int64, error) {
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
func (d *device) devAlloc(n int64) (cu.DevicePtr, error) {
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
func (d *device) devFree(p cu.DevicePtr) error {
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
func (d *device) trimPool() error {
	d.dropHostCall()
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
func (d *device) MemoryHeld() int64 {
	var n int64
	d.do(func() error { n = d.held; return nil })
	return n
}

// SetMemoryLimit bounds MemoryHeld (see devAlloc); n <= 0 removes the bound.
// A bound below what is held frees the idle pool now; memory in use stays.
func (d *device) SetMemoryLimit(n int64) error {
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
func (d *device) reap() {
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
func (d *device) release(bufs []pooled) error {
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

type pooled struct {
	p    cu.DevicePtr
	size int64
}

// zeroWords returns n 32-bit device words that are 0 when the next launch
// starts and that the kernels given them leave 0 (the quantization kernels'
// amax and done words, the paged kernel's split counters): the device's
// scratch, grown as needed, or inside a capture words of the graph's own,
// zeroed once when the capture ends (a memset node would run at every
// replay, and the kernels leave them 0). The caller is inside do.
func (d *device) zeroWords(n int) (uint64, error) {
	if c := d.capturing(); c != nil {
		p, err := d.own(c, 4*int64(n))
		if err != nil {
			return 0, err
		}
		c.zero = append(c.zero, zeroRun{cu.DevicePtr(p), int64(n)})
		return p, nil
	}
	if n > d.quant.scratchWords {
		if d.quant.scratch.p != 0 {
			if err := d.release([]pooled{d.quant.scratch}); err != nil {
				return 0, err
			}
			d.quant.scratch, d.quant.scratchWords = pooled{}, 0
		}
		p, size, err := d.alloc(4 * int64(n))
		if err != nil {
			return 0, err
		}
		d.quant.scratch, d.quant.scratchWords = pooled{p, size}, int(size/4)
		if err := cu.MemsetD32Async(p, 0, size/4, d.stream); err != nil {
			return 0, err
		}
	}
	return uint64(d.quant.scratch.p), nil
}
