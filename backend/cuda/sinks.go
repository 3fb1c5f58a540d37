//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The attention sinks of a call (backend.Variants.Sinks: one float32 logit
// a query head) reach the kernels as a device array (Params.sinks,
// PagedParams.sinks). A call captured into a graph records only the
// array's address, and a capture copies nothing from the host on the
// stream; and a copy from pageable memory on the device's stream would wait
// for the stream's work first, so that an asynchronous call would not be.
// So each distinct array the device is given goes once into device memory
// the device owns, written then and never again, and stays there until
// Close (which no live graph allows): a replay reads the sinks of its
// capture, whatever later calls pass, and a call with the sinks of an
// earlier one copies nothing. The copy goes on a stream of the store's own
// and is waited for, outside the capture (a relaxed capture records
// nothing of another stream's work), before the call's kernels are issued.

// sinkStore is the device's sink arrays: slabs of device memory filled in
// order, and where each distinct array went.
type sinkStore struct {
	at     map[string]uint64 // the array's bytes: its device address
	free   uint64            // the current slab's next address
	left   int64             // and the bytes left in it
	stream cu.Stream
	made   bool // stream was made
}

// Sink arrays go in slabs of sinkSlabBytes (more for a larger array); past
// sinkMaxArrays distinct arrays, a call outside a capture uploads its own
// with its inputs, so that a caller that passes new sinks at every call
// does not grow the device's memory without bound.
const (
	sinkSlabBytes = 64 << 10
	sinkMaxArrays = 1024
)

// sinksOn returns the device address of sinks for a call (capturing: the
// call is being captured), or false where the store keeps sinkMaxArrays
// arrays, sinks is not among them and the call is not captured: the
// caller then uploads the sinks with the call's inputs. The slabs are the
// device's (devAlloc), freed with it. The caller is inside do.
func (d *device) sinksOn(sinks []float32, capturing bool) (uint64, bool, error) {
	k := &d.sinks
	src := bytesOf(sinks)
	if a, ok := k.at[string(src)]; ok {
		return a, true, nil
	}
	if !capturing && len(k.at) >= sinkMaxArrays {
		return 0, false, nil
	}
	n := (int64(len(src)) + 15) &^ 15
	if k.left < n {
		size := max(int64(sinkSlabBytes), n)
		p, err := d.devAlloc(size)
		if err != nil {
			return 0, false, fmt.Errorf("cuda: attention sinks: %w", err)
		}
		k.free, k.left = uint64(p), size
	}
	if !k.made {
		st, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return 0, false, fmt.Errorf("cuda: attention sinks: stream: %w", err)
		}
		k.stream, k.made = st, true
	}
	a := k.free
	if err := errors.Join(cu.MemcpyHtoDAsync(cu.DevicePtr(a), unsafe.Pointer(&src[0]), int64(len(src)), k.stream),
		k.stream.Synchronize()); err != nil {
		return 0, false, fmt.Errorf("cuda: attention sinks: %w", err)
	}
	k.free, k.left = k.free+uint64(n), k.left-n
	if k.at == nil {
		k.at = map[string]uint64{}
	}
	k.at[string(src)] = a
	return a, true, nil
}

// close destroys the store's stream (the device's Close, which frees the
// slabs with the rest of its memory). The caller is inside do.
func (k *sinkStore) close() error {
	var err error
	if k.made {
		err = k.stream.Destroy()
	}
	*k = sinkStore{}
	return err
}

// residentSinks returns the device address of a resident's sinks (0 for
// none): the store's (sinksOn), or, where the store is full, a buffer of
// the resident's (own allocates it) written by a staged upload. The caller
// is inside do.
func (d *device) residentSinks(sinks []float32, own func(int64) (uint64, error)) (uint64, error) {
	if sinks == nil {
		return 0, nil
	}
	a, kept, err := d.sinksOn(sinks, d.capturing() != nil)
	if err != nil || kept {
		return a, err
	}
	if a, err = own(4 * int64(len(sinks))); err != nil {
		return 0, err
	}
	return a, d.upload([]hostCopy{{dev: cu.DevicePtr(a), host: bytesOf(sinks)}})
}
