package sdpa

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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
	// Replay runs ops.
	g   backend.Graph
	ops []func() error
	// caches are the captured KVCache calls: on a device with graphs,
	// their sequences' lengths and pages are in device memory that the
	// caches keep current (KVCache.syncGraphs).
	caches []*graphCacheCall
	keep   []*DeviceTensor // tensors the graph reads or writes (capture.keep), pinned
}

// pin keeps the graph's tensors from being freed and its caches from being
// closed while it lives, and has the caches keep the device tables of its
// calls current, starting with the sequences as they are now.
func (c *graphCore) pin() {
	for _, t := range c.keep {
		t.mu.Lock()
		if !t.freed { // (freed inside the capture: a temporary the graph owns)
			t.pins++
		}
		t.mu.Unlock()
	}
	for _, cc := range c.caches {
		cc.cache.mu.Lock()
		cc.cache.graphs++
		if cc.tables != nil {
			cc.cache.live = append(cc.cache.live, cc)
			cc.stale = cc.writeAll() != nil // (Replay tries again)
		}
		cc.cache.mu.Unlock()
	}
}

// close releases the backend's graph and unpins the tensors and caches.
func (c *graphCore) close() error {
	var err error
	if c.g != nil {
		err = c.g.Close()
	}
	for _, t := range c.keep {
		t.mu.Lock()
		if t.pins > 0 {
			t.pins--
		}
		t.mu.Unlock()
	}
	for _, cc := range c.caches {
		cc.cache.mu.Lock()
		cc.cache.graphs--
		if cc.tables != nil {
			cc.cache.live = slices.DeleteFunc(cc.cache.live, func(x *graphCacheCall) bool { return x == cc })
		}
		cc.cache.mu.Unlock()
		if cc.tables != nil { // (outside the cache's lock: Free waits for the device)
			err = errors.Join(err, cc.tables.Free())
		}
	}
	c.g, c.caches, c.keep, c.ops = nil, nil, nil, nil
	return err
}

// freeTables releases the device tables of a capture that made no graph.
func (rec *capture) freeTables() error {
	var err error
	for _, cc := range rec.caches {
		if cc.tables != nil {
			err = errors.Join(err, cc.tables.Free())
		}
	}
	return err
}

// capture is what a Capture in progress records on the sdpa side (only the
// capturing goroutine reads or writes it: see Device.recording).
type capture struct {
	caches []*graphCacheCall
	// keep holds the tensors the captured calls use, so that none becomes
	// unreachable (and is freed by its cleanup) while the graph lives, and
	// none is freed (ErrInvalid) until the graph is closed.
	keep []*DeviceTensor
	// ops are the calls a replay runs again, on a device without graphs.
	ops []func() error
	// goid is the capturing goroutine, on a device without graphs.
	goid int64
}

// record adds a call for Replay and the tensors it uses (nil ones skipped)
// to a capture on a device without graphs.
func (rec *capture) record(op func() error, ts ...*DeviceTensor) {
	rec.ops = append(rec.ops, op)
	for _, t := range ts {
		if t != nil {
			rec.keep = append(rec.keep, t)
		}
	}
}

// hostCaptures are the captures in progress on devices without graphs, by
// goroutine: a goroutine inside one is inside a capture for every such
// device, as a thread capturing on "cuda" is for every device of it.
var hostCaptures struct {
	n  atomic.Int32 // len(by), read without the lock on every call
	mu sync.Mutex
	by map[int64]*capture
}

// hostRecording returns the capture the calling goroutine records on a
// device without graphs, or nil.
func hostRecording() *capture {
	if hostCaptures.n.Load() == 0 {
		return nil
	}
	id := goid()
	hostCaptures.mu.Lock()
	defer hostCaptures.mu.Unlock()
	return hostCaptures.by[id]
}

// goid returns the calling goroutine's id, from the first line of its
// stack trace ("goroutine 18 [running]:"); it is asked only while a
// capture is in progress.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	var id int64
	if len(b) > len(prefix) {
		for _, c := range b[len(prefix):] {
			if c < '0' || c > '9' {
				break
			}
			id = 10*id + int64(c-'0')
		}
	}
	return id
}

// inCapture reports whether the calling goroutine is inside a Capture on
// d's kind of device ("cuda": a capture of the backend's, on any Device
// opened on it; "cpu": a capture on any device without graphs).
func (d *Device) inCapture() bool {
	if d == nil || d.be == nil {
		return false
	}
	if d.mem == nil {
		return hostRecording() != nil
	}
	cr, ok := d.be.(backend.Capturer)
	return ok && cr.Capturing()
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
// names and, on a device with graphs, the device memory its launch reads
// their lengths and block table from (tables), which the cache writes when
// they change (KVCache.syncGraphs), with the host copy of what it holds.
type graphCacheCall struct {
	cache       *KVCache
	ids         []SeqID
	seqs        []*kvSeq
	lens, table []int32
	per         int // the table's pages a sequence
	sq          int // the call's queries a sequence
	tables      backend.PagedTables
	spans       [][2]int // syncGraphs' scratch: the table entries a change wrote
	// stale: a write to tables failed, and what the device holds is not
	// known; the next replay writes everything first. Under the cache's
	// lock.
	stale bool
}

// Capture records the device work of fn's calls on d (Attention and
// Quantize on device tensors, KVCache.Attention on device tensors, from
// fn's own goroutine) into a Graph, for Replay to run again. On a device
// with graphs ("cuda") fn's calls are checked and recorded but not run:
// their outputs are written by Replay, not by Capture; on a device without
// ("cpu") they run at Capture and the graph runs them again at each Replay.
// Calls from other goroutines on d wait until fn returns on "cuda" (so fn
// must not wait for them); on "cpu" they run and are not recorded.
//
// What a replay reads: the contents of the tensors the calls named, as
// they are at the replay (write new inputs with CopyFrom between replays),
// and for a KVCache.Attention, its sequences' lengths and pages as they are
// at the replay: a decode step captured once serves every later step, as
// long as the sequences stay within the cache's MaxSeqLen. The tensors and
// caches a graph uses cannot be freed or closed (ErrInvalid) until the
// graph is closed.
//
// The same rules hold on every device, so that a program runs the same on
// a laptop and on a GPU host: inside fn, calls that move host data
// (Upload, UploadQuantized, CopyFrom, Download, KVCache.Append) and a
// graph's Replay or Close fail with ErrUnsupported, a Capture inside fn
// fails with ErrInvalid, and Capture returns the first error of fn, with
// no graph. Bookkeeping (NewTensor, Free of a tensor no graph uses,
// AddSequence, Drop) runs at Capture and is not replayed.
func (d *Device) Capture(fn func() error) (*Graph, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: capture of a nil function", ErrInvalid)
	}
	if d.inCapture() {
		return nil, errorf(ErrInvalid, "a capture on %v inside a capture", d)
	}
	cr, ok := d.be.(backend.Capturer)
	if !ok || d.mem == nil {
		return d.hostCapture(fn)
	}
	rec := &capture{}
	bg, err := cr.Capture(func() error {
		d.rec = rec // under the backend's lock, which Capture holds
		defer func() { d.rec = nil }()
		return fn()
	})
	if err != nil {
		return nil, errors.Join(err, rec.freeTables())
	}
	return d.newGraph(&graphCore{g: bg, caches: rec.caches, keep: rec.keep}), nil
}

// hostCapture is Capture on a device without graphs: fn's calls run and are
// recorded, for Replay to run again.
func (d *Device) hostCapture(fn func() error) (*Graph, error) {
	rec := &capture{goid: goid()}
	hostCaptures.mu.Lock()
	if hostCaptures.by == nil {
		hostCaptures.by = map[int64]*capture{}
	}
	hostCaptures.by[rec.goid] = rec
	hostCaptures.n.Add(1)
	hostCaptures.mu.Unlock()
	defer func() {
		hostCaptures.mu.Lock()
		delete(hostCaptures.by, rec.goid)
		hostCaptures.n.Add(-1)
		hostCaptures.mu.Unlock()
	}()
	if err := fn(); err != nil {
		return nil, err
	}
	return d.newGraph(&graphCore{ops: rec.ops, caches: rec.caches, keep: rec.keep}), nil
}

// newGraph pins core's tensors and caches and returns its Graph.
func (d *Device) newGraph(core *graphCore) *Graph {
	core.pin()
	g := &Graph{dev: d, core: core}
	g.cleanup = runtime.AddCleanup(g, func(c *graphCore) { c.close() }, core)
	return g
}

// recording returns the capture the calling goroutine is recording on d,
// or nil. On a device with graphs, d.rec is set only while a capture runs,
// by its goroutine, and is read only by a goroutine the backend says is
// capturing: that one.
func (d *Device) recording() *capture {
	if d == nil {
		return nil
	}
	if d.mem == nil {
		return hostRecording()
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
// was dropped is an error (ErrInvalid), and nothing runs. On a device with
// graphs a replay is one graph launch: the sequences' lengths and block
// tables are in device memory, which KVCache.Append and Truncate update
// when they change them.
func (g *Graph) Replay() error {
	if g == nil || g.core == nil {
		return fmt.Errorf("%w: a graph not made by Capture", ErrInvalid)
	}
	if g.dev.inCapture() {
		return errorf(ErrUnsupported, "replaying a graph inside a graph capture on %v", g.dev)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errorf(ErrInvalid, "a graph of device %v replayed after Close", g.dev)
	}
	if g.core.g == nil {
		// Every captured KVCache.Attention's sequences are checked before
		// any call runs, so that a replay that cannot run writes nothing.
		// (A sequence that changes between its check and its call is
		// checked again by the call.)
		for _, cc := range g.core.caches {
			cc.cache.mu.RLock()
			err := cc.check()
			cc.cache.mu.RUnlock()
			if err != nil {
				return err
			}
		}
		for _, op := range g.core.ops {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	}
	// The caches' read locks are held until the replay is issued, so that
	// no Append, Truncate or Drop changes a sequence between its check and
	// the launch (their writes to the device tables are ordered after it).
	for _, cc := range g.core.caches {
		cc.cache.mu.RLock()
		defer cc.cache.mu.RUnlock()
		if err := cc.check(); err != nil {
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
	if g.dev.inCapture() {
		return errorf(ErrUnsupported, "closing a graph inside a graph capture on %v", g.dev)
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

// check returns an error if the call cannot replay: its cache is closed,
// a sequence was dropped or holds fewer tokens than the call's queries. A
// stale call's tables are written whole first. The caller holds the
// cache's lock (read or write) and the graph's.
func (cc *graphCacheCall) check() error {
	c := cc.cache
	if err := c.errClosed(); err != nil {
		return err
	}
	for i, s := range cc.seqs {
		if s.dropped {
			return errorf(ErrInvalid, "the graph reads sequence %d, which is no longer in the cache", cc.ids[i])
		}
		if s.n > 0 && s.n < cc.sq {
			return errorf(ErrInvalid, "the graph's %d queries are the last positions of sequence %d, which holds %d tokens", cc.sq, cc.ids[i], s.n)
		}
	}
	if cc.stale {
		if err := cc.writeAll(); err != nil {
			return err
		}
		cc.stale = false
	}
	return nil
}

// writeAll writes the sequences' lengths and whole block table into the
// call's device tables. The caller holds the cache's lock.
func (cc *graphCacheCall) writeAll() error {
	fillTable(cc.seqs, cc.lens, cc.table, cc.per)
	return cc.tables.Write(cc.lens, cc.table, [][2]int{{0, len(cc.table)}})
}
