package sdpa

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// hostMem is the memory account of a device that keeps its tensors and
// caches in host memory ("cpu"): what it holds and the bound on it, so that
// an allocation the machine cannot hold is ErrOutOfMemory before the Go
// runtime is asked for it (which would end the process).
//
// The bound counts the tensors and caches the device holds, not a call's
// scratch nor the rest of the program's heap. Its default is the machine's
// physical memory (physicalMemory); it cannot be removed, since past it the
// runtime ends the process instead of returning an error.
type hostMem struct {
	held  atomic.Int64
	limit atomic.Int64
}

func newHostMem() *hostMem {
	h := &hostMem{}
	h.limit.Store(defaultHostLimit())
	return h
}

// reserve counts n more bytes as held, or returns ErrOutOfMemory (counting
// nothing) if that would pass the bound. what names the allocation.
func (h *hostMem) reserve(n int64, what string) error {
	for {
		held, limit := h.held.Load(), h.limit.Load()
		if n < 0 || n > limit-held {
			return errorf(ErrOutOfMemory, "%s needs %d bytes; the device holds %d of its bound of %d (Device.SetMemoryLimit)", what, n, held, limit)
		}
		if h.held.CompareAndSwap(held, held+n) {
			return nil
		}
	}
}

// release counts n bytes as no longer held.
func (h *hostMem) release(n int64) { h.held.Add(-n) }

// setLimit sets the bound; n <= 0 restores the default.
func (h *hostMem) setLimit(n int64) {
	if n <= 0 {
		n = defaultHostLimit()
	}
	h.limit.Store(n)
}

// hostLimit is the default bound, read once.
var hostLimit = sync.OnceValue(func() int64 {
	if n := physicalMemory(); n > 0 {
		return n
	}
	return fallbackHostLimit
})

// defaultHostLimit returns the default bound of a host-memory device: the
// machine's physical memory (on Linux the smaller of MemTotal and the
// cgroup's memory.max; on darwin hw.memsize), or fallbackHostLimit where it
// cannot be read.
func defaultHostLimit() int64 { return hostLimit() }

// fallbackHostLimit is the default bound where the physical memory cannot
// be read: 4 GiB, which a machine that runs this library has, so that a
// size from a configuration error fails instead of ending the process.
// Device.SetMemoryLimit raises it.
const fallbackHostLimit = 4 << 30

// usageError is an error of the API's use (a freed tensor, a closed cache,
// another device's tensor, an allocation past a bound) that says what it
// is about and wraps its sentinel without repeating the sentinel's text.
type usageError struct {
	msg  string
	kind error
}

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Unwrap() error { return e.kind }

// errorf returns a usageError wrapping kind, its text "sdpa: " and format.
func errorf(kind error, format string, args ...any) error {
	return &usageError{msg: "sdpa: " + fmt.Sprintf(format, args...), kind: kind}
}
