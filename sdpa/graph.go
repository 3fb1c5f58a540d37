package sdpa

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/fp8attn/fp8attn/backend"
)

// Graph is a recorded sequence of device calls (Device.Capture) that Replay
// runs again: one model step (quantize, attention, a decode over a
// KVCache) issued once, then replayed at a launch's cost. On "cuda" it is a
// CUDA graph: a launch from the host costs about 3.5 µs a kernel there, a
// replayed kernel about 0.6 µs.
//
// A Graph is safe for concurrent use; replays run one after another on the
// device, in the order they are issued.
type Graph struct {
	dev    *Device
	mu     sync.Mutex
	core   *graphCore
	closed bool
	// cleanup closes the graph if it is dropped without Close (its pins
	// would otherwise keep its tensors and caches from being freed).
	cleanup runtime.Cleanup
}

// graphCore is what a Graph holds, apart from the Graph itself so that a
// cleanup can close it.
type graphCore struct {
	// g is the backend's graph; nil on a device without graphs, where
	// Replay calls fn again.
	g  backend.Graph
	fn func() error
	// caches are the captured KVCache calls, whose sequences' lengths and
	// pages Replay reads again before each replay.
	caches []*graphCacheCall
	keep   []*DeviceTensor // tensors the graph reads or writes (capture.keep)
}

// close releases the backend's graph and unpins the caches.
func (c *graphCore) close() error {
	var err error
	if c.g != nil {
		err = c.g.Close()
	}
	for _, cc := range c.caches {
		cc.cache.mu.Lock()
		cc.cache.graphs--
		cc.cache.mu.Unlock()
	}
	c.g, c.caches, c.keep, c.fn = nil, nil, nil, nil
	return err
}

// capture is what a Capture in progress records on the sdpa side (only the
// capturing goroutine reads or writes it: see Device.recording).
type capture struct {
	caches []*graphCacheCall
	// keep holds the tensors the captured calls use, so that none becomes
	// unreachable (and is freed by its cleanup) while the graph lives.
	keep []*DeviceTensor
}

// keep adds the tensors (nil ones skipped) to the capture the calling
// goroutine is recording on d, if any.
func (d *Device) keep(ts ...*DeviceTensor) {
	rec := d.recording()
	if rec == nil {
		return
	}
	for _, t := range ts {
		if t != nil {
			rec.keep = append(rec.keep, t)
		}
	}
}

// graphCacheCall is one KVCache.Attention inside a graph: the sequences it
// names and the host lengths and block table the backend uploads before
// each replay (Replay refills them).
type graphCacheCall struct {
	cache       *KVCache
	ids         []SeqID
	seqs        []*kvSeq // refill's scratch (Replay holds the graph's lock)
	lens, table []int32
	per         int // the table's pages a sequence
}

// Capture records the device work of fn's calls on d (Attention and
// Quantize on device tensors, KVCache.Attention on device tensors, from
// fn's own goroutine) into a Graph, for Replay to run again. On a device
// with graphs ("cuda") fn's calls are checked and recorded but not run:
// their outputs are written by Replay, not by Capture. Calls from other
// goroutines on d wait until fn returns (so fn must not wait for them).
//
// What a replay reads: the contents of the tensors the calls named, as
// they are at the replay (write new inputs with CopyFrom between replays),
// and for a KVCache.Attention, its sequences' lengths and pages as they are
// at the replay: a decode step captured once serves every later step, as
// long as the sequences stay within the cache's MaxSeqLen. The tensors and
// caches a graph uses cannot be freed or closed (ErrInvalid) until the
// graph is closed.
//
// Inside fn, calls that move host data (Upload, CopyFrom, Download,
// KVCache.Append) fail with ErrUnsupported on "cuda", and Capture returns
// the first error of fn. On a device without graphs ("cpu"), Capture calls
// fn once, to report its errors, and Replay calls it again: fn should do
// nothing but device calls, so that a program runs the same on both.
func (d *Device) Capture(fn func() error) (*Graph, error) {
	if d == nil || d.be == nil {
		return nil, fmt.Errorf("%w: capture on a device not made by Open", ErrInvalid)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: capture of a nil function", ErrInvalid)
	}
	cr, ok := d.be.(backend.Capturer)
	if !ok || d.mem == nil {
		if err := fn(); err != nil {
			return nil, err
		}
		return &Graph{dev: d, core: &graphCore{fn: fn}}, nil
	}
	if d.recording() != nil {
		return nil, fmt.Errorf("%w: a capture inside a capture", ErrUnsupported)
	}
	rec := &capture{}
	bg, err := cr.Capture(func() error {
		d.rec = rec // under the backend's lock, which Capture holds
		defer func() { d.rec = nil }()
		return fn()
	})
	if err != nil {
		return nil, err
	}
	core := &graphCore{g: bg, caches: rec.caches, keep: rec.keep}
	for _, cc := range core.caches {
		cc.cache.mu.Lock()
		cc.cache.graphs++
		cc.cache.mu.Unlock()
	}
	g := &Graph{dev: d, core: core}
	g.cleanup = runtime.AddCleanup(g, func(c *graphCore) { c.close() }, core)
	return g, nil
}

// recording returns the capture the calling goroutine is recording on d,
// or nil. d.rec is set only while a capture runs, by its goroutine, and is
// read only by a goroutine the backend says is capturing: that one.
func (d *Device) recording() *capture {
	if d == nil || d.mem == nil {
		return nil
	}
	cr, ok := d.be.(backend.Capturer)
	if !ok || !cr.Capturing() {
		return nil
	}
	return d.rec
}

// Replay runs the graph's calls again, after the device work issued before
// it, and returns without waiting for the device (as the calls themselves
// do; an error of the device work surfaces at the next Download). A
// captured KVCache.Attention reads its sequences as they are now: one that
// was dropped is an error (ErrInvalid), and nothing runs.
func (g *Graph) Replay() error {
	if g == nil || g.core == nil {
		return fmt.Errorf("%w: a graph not made by Capture", ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("%w: graph replayed after Close", ErrInvalid)
	}
	if g.core.g == nil {
		return g.core.fn()
	}
	// The caches' read locks are held until the replay is issued, so that
	// no Append or Drop changes a sequence between its refill and the
	// launch (work issued after the launch is ordered after it).
	for _, cc := range g.core.caches {
		cc.cache.mu.RLock()
		defer cc.cache.mu.RUnlock()
		if err := cc.refill(); err != nil {
			return err
		}
	}
	return g.core.g.Replay()
}

// Close waits for the graph's replays to finish and releases it; the
// tensors and caches it used can be freed again. A second Close does
// nothing. A graph dropped without Close is closed when the garbage
// collector finds it unreachable, later and unpredictably: call Close.
func (g *Graph) Close() error {
	if g == nil || g.core == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	g.cleanup.Stop()
	return g.core.close()
}

// refill writes the sequences' lengths and pages into the call's host
// slices. The caller holds the cache's lock (read or write).
func (cc *graphCacheCall) refill() error {
	c := cc.cache
	if err := c.errClosed(); err != nil {
		return err
	}
	seqs := cc.seqs[:len(cc.ids)]
	for i, id := range cc.ids {
		s, ok := c.seqs[id]
		if !ok {
			return fmt.Errorf("%w: the graph reads sequence %d, which is no longer in the cache", ErrInvalid, id)
		}
		if len(s.pages) > cc.per { // (Append keeps sequences within MaxSeqLen)
			return errors.New("sdpa: internal error: a sequence outgrew its graph's block table")
		}
		seqs[i] = s
	}
	fillTable(seqs, cc.lens, cc.table, cc.per)
	return nil
}
