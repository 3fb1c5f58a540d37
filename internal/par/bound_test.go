package par

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkIdealForkJoin is the bound a fork-join of about 1 ms can reach
// on the machine as it is (docs/design/cpu.md: one core busy): calls of
// 200 independent chunks of a few microseconds, claimed atomically by the
// calling goroutine and GOMAXPROCS-1 helpers that poll for the next call,
// no data shared; a worker that finds no chunk left redoes the claimed
// ones not yet finished (a descheduled worker's), and a call ends once
// every chunk is done by someone. Nothing the library does comes into it.
// Run it at GOMAXPROCS 1 and 2, with and without other work on a core.
func BenchmarkIdealForkJoin(b *testing.B) {
	const chunks, per = 200, 3000
	type call struct {
		next  atomic.Int64
		state [chunks]atomic.Bool // done
		done  atomic.Int64
	}
	var sink atomic.Uint64
	chunk := func() {
		x := 1.0001
		for range per {
			x = x*1.0000001 + 1e-9
		}
		sink.Add(uint64(x))
	}
	finish := func(c *call, i int) {
		if !c.state[i].Swap(true) {
			c.done.Add(1)
		}
	}
	work := func(c *call) {
		for i := c.next.Add(1) - 1; i < chunks; i = c.next.Add(1) - 1 {
			chunk()
			finish(c, int(i))
		}
		for i := range c.state { // the stragglers'
			if c.done.Load() == chunks {
				return
			}
			if !c.state[i].Load() {
				chunk()
				finish(c, i)
			}
		}
	}
	var cur atomic.Pointer[call]
	var stop atomic.Bool
	defer stop.Store(true)
	for range runtime.GOMAXPROCS(0) - 1 {
		go func() {
			var seen *call
			for !stop.Load() {
				if c := cur.Load(); c != nil && c != seen {
					seen = c
					work(c)
				}
				runtime.Gosched()
			}
		}()
	}
	for b.Loop() {
		c := new(call)
		cur.Store(c)
		work(c)
		for c.done.Load() < chunks {
			runtime.Gosched()
		}
	}
}
