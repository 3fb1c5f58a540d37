package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A dense call on an assembly kernel set may return while a helper is
// still in its Work (par.Detacher): the calling goroutine, once the
// blocks are all taken, computes again each block a helper has not
// finished after a grace time (the helper's thread may be off its core
// for milliseconds, its core shared with other programs), and the first
// worker to finish a block writes its output. What a helper left behind
// touches afterwards is the call's own memory (kept until it leaves:
// Release) and, in the assembly kernels, the caller's inputs, read and
// discarded; every Go-code read of the caller's inputs and every write of
// its outputs is inside the call's gate (enter, leave), which the caller
// closes, waiting for those inside, before it returns.
type detachState struct {
	detach   bool           // the call may return before its helpers
	detached bool           // it did: the caller and Release both drop it
	holds    atomic.Int32   // drops still to come before c is reused
	gate     atomic.Int64   // workers inside, plus gateClosed once closed
	state    []atomic.Int32 // per item: itemOpen, itemWriting, itemDone
	done     atomic.Int64   // items done
}

const (
	itemOpen int32 = iota
	itemWriting
	itemDone
)

const gateClosed = 1 << 40

// commitHook, where not nil (tests), runs on worker w when it has computed
// a block, before it writes the block's output.
var commitHook func(w int)

// resetDetach readies c's detach state for a run of c.items items.
func (c *call) resetDetach() {
	c.detached = false
	c.gate.Store(0)
	c.done.Store(0)
	if !c.detach {
		return
	}
	if cap(c.state) < c.items {
		c.state = make([]atomic.Int32, c.items)
	}
	c.state = c.state[:c.items]
	for i := range c.state {
		c.state[i].Store(itemOpen)
	}
}

// enter lets a worker into the gate: false once the caller has closed it
// (the worker then reads no input and writes no output).
func (c *call) enter() bool {
	if !c.detach {
		return true
	}
	if c.gate.Add(1) >= gateClosed {
		c.gate.Add(-1)
		return false
	}
	return true
}

// leave lets a worker out of the gate.
func (c *call) leave() {
	if c.detach {
		c.gate.Add(-1)
	}
}

// stale says the block a worker runs (sc.item) is another's to write,
// done or being written: the worker drops it.
func (c *call) stale(sc *scratch) bool {
	return c.detach && c.state[sc.item].Load() != itemOpen
}

// commit enters the gate to write block sc.item's output, where no other
// worker has written it; false: the worker drops the block.
func (c *call) commit(sc *scratch) bool {
	if !c.detach {
		return true
	}
	if !c.enter() {
		return false
	}
	if !c.state[sc.item].CompareAndSwap(itemOpen, itemWriting) {
		c.leave()
		return false
	}
	return true
}

// committed ends commit's write.
func (c *call) committed(sc *scratch) {
	if c.detach {
		c.state[sc.item].Store(itemDone)
		c.done.Add(1)
		c.leave()
	}
}

// finish is the calling goroutine's end of a detachable call, when every
// block is taken: it computes each block not yet done (after waiting for
// a while for its worker, took on average: once the blocks it ran itself)
// until all are, then closes the gate.
func (c *call) finish(sc *scratch, ran int, took time.Duration) {
	grace := 2 * took
	if ran > 0 {
		grace = 2 * took / time.Duration(ran)
	}
	start := time.Now()
	for i := 1; c.done.Load() < int64(c.items); i++ {
		if time.Since(start) >= grace {
			for it := range c.items {
				if c.state[it].Load() == itemOpen {
					sc.item, sc.next, sc.abort = it, -1, false
					c.block(sc, it)
				}
			}
		}
		if i%256 == 0 {
			runtime.Gosched()
		}
	}
	c.gate.Add(gateClosed)
	for i := 1; c.gate.Load() != gateClosed; i++ {
		if i%256 == 0 {
			runtime.Gosched()
		}
	}
}

// Detach lets the pool return without waiting for the helpers (par.Detacher)
// where the call is detachable and the pool's cores are shared (a call in
// flight then holds its scratch: the next takes another).
func (c *call) Detach() bool {
	if !c.detach || !c.b.pool.Shared() {
		return false
	}
	c.detached = true
	c.holds.Store(2)
	return true
}

// Release is the last helper's leaving of a detached call.
func (c *call) Release() { c.drop() }

// drop hands a detached call back to its backend at the second drop.
func (c *call) drop() {
	if c.holds.Add(-1) == 0 {
		c.detached, c.p = false, nil
		c.b.calls.Put(c)
	}
}
