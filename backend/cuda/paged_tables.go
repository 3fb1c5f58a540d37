//go:build cuda

package cuda

/*
#include <cuda.h>
#include <stdlib.h>

// Ends the capture of s and counts its graph's nodes by type, without
// instantiating it (capturedNodes).
static CUresult fp8attn_capture_census(CUstream s, int* kernels, int* copies, int* others) {
	CUgraph g;
	CUresult r = cuStreamEndCapture(s, &g);
	if (r != CUDA_SUCCESS) return r;
	size_t n = 0;
	r = cuGraphGetNodes(g, NULL, &n);
	CUgraphNode* nodes = n ? (CUgraphNode*)malloc(n * sizeof(CUgraphNode)) : NULL;
	if (r == CUDA_SUCCESS && n) r = cuGraphGetNodes(g, nodes, &n);
	for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
		CUgraphNodeType t;
		r = cuGraphNodeGetType(nodes[i], &t);
		if (r != CUDA_SUCCESS) break;
		if (t == CU_GRAPH_NODE_TYPE_KERNEL) (*kernels)++;
		else if (t == CU_GRAPH_NODE_TYPE_MEMCPY) (*copies)++;
		else (*others)++;
	}
	free(nodes);
	CUresult r2 = cuGraphDestroy(g);
	return r != CUDA_SUCCESS ? r : r2;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/checked"
)

// A paged attention captured into a graph reads its sequence lengths and
// block table from device memory (pagedTables) that the cache's owner
// writes when a sequence changes (an append, a truncation), not at every
// replay: the graph holds the attention kernel(s) alone, and a replay is
// one graph launch.

// pagedTables implements backend.PagedTables: lens [b] then table
// [b][per], int32, in one device allocation, with a page-locked host
// mirror of what the copies issued so far leave there.
type pagedTables struct {
	dev    *device
	b, per int
	buf    pooled
	// mirror is made at the first Write (outside any capture), which
	// copies everything; later Writes copy what differs from it.
	mirror []int32
	host   []byte   // mirror's page-locked memory
	done   cu.Event // recorded behind the last copy from the mirror
	busy   bool     // done is pending
	whole  bool     // the next Write copies everything (the first, or one after a failed copy)
	runs   [][2]int // Write's scratch
}

// tableCopies counts the host-to-device copies that pagedTables.Write
// issues (tests: a replay issues none, an append the few it needs).
var tableCopies atomic.Int64

// NewTables implements backend.PagedTableMaker. It may be called inside a
// capture (the memory is then allocated, not cleared: the first Write
// copies the whole of lens and table).
func (s *pagedKV) NewTables(b, per int) (backend.PagedTables, error) {
	if err := s.errClosed(); err != nil {
		return nil, err
	}
	words, ok := checked.Mul(b, per+1)
	if b <= 0 || per <= 0 || !ok || words > 1<<30 {
		return nil, fmt.Errorf("%w: cuda: tables of %d sequences of %d pages", backend.ErrInvalid, b, per)
	}
	t := &pagedTables{dev: s.dev, b: b, per: per}
	err := s.dev.do(func() error {
		p, size, err := s.dev.alloc(4 * int64(words))
		t.buf = pooled{p, size}
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// addrs returns the device addresses of the lengths and of the table.
func (t *pagedTables) addrs() (lens, table uint64) {
	return uint64(t.buf.p), uint64(t.buf.p) + 4*uint64(t.b)
}

// Write implements backend.PagedTables: one copy for the lengths that
// changed, and one for each run of table entries that did (runs less than
// tableMergeGap entries apart go as one, and more than tableMaxCopies runs
// as one span), from the mirror.
func (t *pagedTables) Write(lens, table []int32, spans [][2]int) error {
	if t == nil || t.dev == nil {
		return fmt.Errorf("%w: cuda: nil tables", backend.ErrInvalid)
	}
	if len(lens) != t.b || len(table) != t.b*t.per {
		return fmt.Errorf("%w: cuda: writing %d lengths and %d table entries into tables of %d sequences of %d pages",
			backend.ErrInvalid, len(lens), len(table), t.b, t.per)
	}
	end := 0
	for _, sp := range spans {
		if sp[0] < end || sp[1] < sp[0] || sp[1] > len(table) {
			return fmt.Errorf("%w: cuda: table spans %v: not increasing, or outside the table's %d entries", backend.ErrInvalid, spans, len(table))
		}
		end = sp[1]
	}
	if t.dev.capturing() != nil {
		return errCapture("writing a paged attention's lengths and block table")
	}
	return t.dev.do(func() error {
		if t.buf.p == 0 {
			return fmt.Errorf("%w: cuda: tables written after Free", backend.ErrInvalid)
		}
		if t.mirror == nil {
			n := t.b * (t.per + 1)
			host, err := hostAlloc(4 * n)
			if err != nil {
				return err
			}
			ev, err := cu.MakeEvent(cu.DisableTiming)
			if err != nil {
				return errors.Join(fmt.Errorf("cuda: event: %w", err), hostFree(host))
			}
			t.host, t.done = host, ev
			t.mirror = unsafe.Slice((*int32)(unsafe.Pointer(&host[0])), n)
			t.whole = true
		}
		// What differs: the lengths' run, and the table's runs (mirror
		// words t.b onwards), each a span trimmed to its first and last
		// difference.
		ml, mt := t.mirror[:t.b], t.mirror[t.b:]
		la, lb := differ(ml, lens)
		t.runs = t.runs[:0]
		if t.whole {
			la, lb = 0, t.b
			t.runs = append(t.runs, [2]int{0, len(table)})
		} else {
			for _, sp := range spans {
				if a, b := differ(mt[sp[0]:sp[1]], table[sp[0]:sp[1]]); a < b {
					t.runs = append(t.runs, [2]int{sp[0] + a, sp[0] + b})
				}
			}
		}
		if la == lb && len(t.runs) == 0 {
			return nil
		}
		if t.busy { // the mirror is the source of a copy in flight
			if err := t.done.Synchronize(); err != nil {
				return fmt.Errorf("cuda: table copy: %w", err)
			}
			t.busy = false
		}
		copy(ml[la:lb], lens[la:lb])
		for _, r := range t.runs {
			copy(mt[r[0]:r[1]], table[r[0]:r[1]])
		}
		// The copies, from the mirror (so that entries between merged
		// runs go as they are).
		t.whole = true // until the copies are issued: what the device holds is unknown
		put := func(lo, hi int) error {
			if err := cu.MemcpyHtoDAsync(t.buf.p+cu.DevicePtr(4*lo), unsafe.Pointer(&t.mirror[lo]), int64(4*(hi-lo)), t.dev.stream); err != nil {
				return fmt.Errorf("cuda: table copy: %w", err)
			}
			tableCopies.Add(1)
			return nil
		}
		if la < lb {
			if err := put(la, lb); err != nil {
				return err
			}
		}
		merged := 0
		for i := 1; i < len(t.runs); i++ {
			if t.runs[i][0]-t.runs[merged][1] <= tableMergeGap {
				t.runs[merged][1] = t.runs[i][1]
			} else {
				merged++
				t.runs[merged] = t.runs[i]
			}
		}
		runs := t.runs[:min(merged+1, len(t.runs))]
		if len(runs) > tableMaxCopies {
			runs = [][2]int{{runs[0][0], runs[len(runs)-1][1]}}
		}
		for _, r := range runs {
			if err := put(t.b+r[0], t.b+r[1]); err != nil {
				return err
			}
		}
		if err := t.done.Record(t.dev.stream); err != nil {
			return fmt.Errorf("cuda: event record: %w", err)
		}
		t.busy, t.whole = true, false
		return nil
	})
}

// Runs of changed table entries closer than tableMergeGap entries go in one
// copy (a copy's fixed cost is a few µs, a KB of more bytes a fraction of
// one); more than tableMaxCopies runs go as one span.
const (
	tableMergeGap  = 1024
	tableMaxCopies = 4
)

// differ returns the first and one past the last index where a and b
// differ (lo == hi where they do not).
func differ(a, b []int32) (lo, hi int) {
	lo = 0
	for lo < len(a) && a[lo] == b[lo] {
		lo++
	}
	if lo == len(a) {
		return 0, 0
	}
	hi = len(a)
	for a[hi-1] == b[hi-1] {
		hi--
	}
	return lo, hi
}

// Free implements backend.PagedTables.
func (t *pagedTables) Free() error {
	if t == nil || t.dev == nil {
		return nil
	}
	return t.dev.do(func() error {
		if t.buf.p == 0 {
			return nil
		}
		var errs []error
		if t.mirror != nil {
			if t.dev.capturing() != nil {
				return errCapture("freeing a paged attention's written tables")
			}
			if t.busy {
				errs = append(errs, t.done.Synchronize())
			}
			errs = append(errs, hostFree(t.host), cu.DestroyEvent(&t.done))
			t.mirror, t.host, t.busy = nil, nil, false
		}
		errs = append(errs, t.dev.release([]pooled{t.buf}))
		t.buf = pooled{}
		return errors.Join(errs...)
	})
}

// PagedTableCopies returns how many host-to-device copies the paged
// caches' tables have issued in this process (diagnostics and tests: a
// replay issues none, a decode step's append one, two where a page is
// added).
func (b *kernelBackend) PagedTableCopies() int64 { return tableCopies.Load() }

// capturedNodes records issue's work on d's stream as Capture does and
// counts the graph's nodes by kind, without instantiating it (tests: what
// a replay of such a graph runs).
func (d *device) capturedNodes(issue func() error) (kernels, copies, others int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setCurrent(d.ctx); err != nil {
		return 0, 0, 0, err
	}
	c := &captureState{thread: currentThread()}
	if err := beginCapture(d.stream, true); err != nil {
		return 0, 0, 0, err
	}
	d.capture.Store(c)
	captures.Add(1)
	ierr := issue()
	d.capture.Store(nil)
	captures.Add(-1)
	var k, m, o C.int
	errs := []error{ierr, check("cuStreamEndCapture", C.fp8attn_capture_census(cStream(d.stream), &k, &m, &o))}
	for _, z := range c.zero {
		errs = append(errs, cu.MemsetD32Async(z.p, 0, z.n, d.stream))
	}
	errs = append(errs, d.release(c.bufs))
	return int(k), int(m), int(o), errors.Join(errs...)
}

// EventTimes times the device work of call, issued from the host back to
// back (a Graph's Replay, a call of the sdpa API on device 0: work on the
// device's stream that call does not wait for), between CUDA events: µs a
// call, one figure a batch of 10 calls, after 10 warm-up calls. Host work
// that holds the device back shows as device time (benchmarks: the decode
// mode of cmd/sdpabench times a replayed KVCache.Attention so).
func (b *kernelBackend) EventTimes(iters int, call func() error) ([]float64, error) {
	d, err := openDevice(0)
	if err != nil {
		return nil, err
	}
	const batch = 10
	n := max(iters/batch, 5)
	evs := make([]cu.Event, n+1)
	made := 0
	defer func() {
		d.do(func() error {
			for i := range made {
				cu.DestroyEvent(&evs[i])
			}
			return nil
		})
	}()
	err = d.do(func() error {
		for ; made < len(evs); made++ {
			ev, err := cu.MakeEvent(cu.DefaultEvent)
			if err != nil {
				return fmt.Errorf("cuda: event: %w", err)
			}
			evs[made] = ev
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for range 10 {
		if err := call(); err != nil {
			return nil, err
		}
	}
	record := func(i int) error { return d.do(func() error { return evs[i].Record(d.stream) }) }
	if err := record(0); err != nil {
		return nil, err
	}
	for i := range n {
		for range batch {
			if err := call(); err != nil {
				return nil, err
			}
		}
		if err := record(i + 1); err != nil {
			return nil, err
		}
	}
	out := make([]float64, n)
	err = d.do(func() error {
		if err := evs[n].Synchronize(); err != nil {
			return fmt.Errorf("cuda: kernel failed: %w", err)
		}
		for i := range out {
			ms, err := evs[i].Elapsed(evs[i+1])
			if err != nil {
				return err
			}
			out[i] = float64(ms) * 1e3 / batch
		}
		return nil
	})
	return out, err
}
