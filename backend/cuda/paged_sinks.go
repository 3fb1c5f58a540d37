//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The attention sinks of a paged attention (backend.Variants.Sinks: one
// float32 logit a query head) reach the kernels as a device array
// (PagedParams.sinks). A call captured into a graph records only the
// array's address, and a capture copies nothing from the host on the
// stream; so each distinct array a cache is given goes once into device
// memory the cache owns, written then and never again, and stays there
// until Close (which no live graph allows): a replay reads the sinks of its
// capture, whatever later calls pass. The copy goes on a stream of the
// cache's own and is waited for, outside the capture (a relaxed capture
// records nothing of another stream's work), before the call's kernels are
// issued.

// pagedSinks is a cache's sink arrays on the device: slabs of device memory
// filled in order, and where each distinct array went.
type pagedSinks struct {
	at     map[string]uint64 // the array's bytes: its device address
	slabs  []cu.DevicePtr
	free   uint64 // the current slab's next address
	left   int64  // and the bytes left in it
	stream cu.Stream
	made   bool // stream was made
}

// Sink arrays go in slabs of sinkSlabBytes (more for a larger array); past
// sinkMaxArrays distinct arrays, a call outside a capture uploads its own
// with its inputs, so that a caller that passes new sinks at every call
// does not grow the cache's memory without bound.
const (
	sinkSlabBytes = 64 << 10
	sinkMaxArrays = 1024
)

// sinksOn returns the device address of sinks for a call (capturing: the
// call is being captured). Outside a capture, once the cache keeps
// sinkMaxArrays arrays, an array not among them goes to the call's staging
// buffer, its copy added to copies. The caller is inside do.
func (s *pagedKV) sinksOn(sinks []float32, capturing bool, copies *[]hostCopy) (uint64, error) {
	k := &s.sinks
	src := bytesOf(sinks)
	if a, ok := k.at[string(src)]; ok {
		return a, nil
	}
	if !capturing && len(k.at) >= sinkMaxArrays {
		return s.put(copies, "sinks", src)
	}
	n := (int64(len(src)) + 15) &^ 15
	if k.left < n {
		size := max(int64(sinkSlabBytes), n)
		p, err := s.dev.devAlloc(size)
		if err != nil {
			return 0, fmt.Errorf("cuda: paged attention sinks: %w", err)
		}
		k.slabs = append(k.slabs, p)
		k.free, k.left = uint64(p), size
	}
	if !k.made {
		st, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return 0, fmt.Errorf("cuda: paged attention sinks: stream: %w", err)
		}
		k.stream, k.made = st, true
	}
	a := k.free
	if err := errors.Join(cu.MemcpyHtoDAsync(cu.DevicePtr(a), unsafe.Pointer(&src[0]), int64(len(src)), k.stream),
		k.stream.Synchronize()); err != nil {
		return 0, fmt.Errorf("cuda: paged attention sinks: %w", err)
	}
	k.free, k.left = k.free+uint64(n), k.left-n
	if k.at == nil {
		k.at = map[string]uint64{}
	}
	k.at[string(src)] = a
	return a, nil
}

// close frees the slabs and the stream (Close, after the device's stream
// has drained). The caller is inside do.
func (k *pagedSinks) close(d *device) error {
	var errs []error
	for _, p := range k.slabs {
		errs = append(errs, d.devFree(p))
	}
	if k.made {
		errs = append(errs, k.stream.Destroy())
	}
	*k = pagedSinks{}
	return errors.Join(errs...)
}
