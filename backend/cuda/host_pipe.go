package cuda

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/ntcopy"
	"github.com/fp8attn/fp8attn/internal/par"
)

// A host-slice call moves its float32 inputs to the device and its output
// back through page-locked memory, once each way, in chunks: a region of
// device memory (the inputs, or the outputs) is cut into chunks, each
// chunk goes through one slot of a page-locked ring, and the ring's slots
// are reused once the copy that read (or wrote) them has completed. The
// memmoves between Go memory and the ring run on the helpers of
// par.Default, a small piece at a time, so that on the way in the bus
// copies chunk i while the helpers fill chunk i+1, and on the way out they
// empty chunk i while the bus fills chunk i+1. The calling goroutine is
// the pipe's one voice to the device: it queues each chunk's copy once its
// pieces are done and learns when each copy has completed, polling, and
// takes pieces itself while no helper has joined; the helpers only move
// bytes and watch the chunks' states. The way in writes the ring of a
// region of a few megabytes with non-temporal stores (streamMax): the bus
// read lines that a memmove had just left in the CPU's caches at half its
// speed. Driver calls from several threads at once serialize in
// the driver (an asynchronous copy call took about 14 µs in a pipeline
// whose helpers called the driver, 2.8 µs alone: docs/BENCHMARKS.md).

// hostEngine is what a pipe needs of the device: copies on one in-order
// queue between the ring and the region, and one event a slot. Its
// methods may be called from any goroutine, one at a time or at once.
type hostEngine interface {
	// toDevice queues the copy of src (ring memory) to byte off of the
	// region.
	toDevice(off int, src []byte) error
	// toHost queues the copy of byte off of the region into dst (ring
	// memory).
	toHost(dst []byte, off int) error
	// record marks slot's event behind the copies queued so far.
	record(slot int) error
	// done reports, without waiting, whether the work before slot's latest
	// record has completed.
	done(slot int) (bool, error)
}

// hostSeg is one piece of a region: its bytes [off, off+len(host)) are
// host's (the source of an upload, the destination of a download).
type hostSeg struct {
	off  int
	host []byte
}

// Chunk sizes: a region is cut into chunks of about equal size (a multiple
// of pipeAlign): one per pipeChunkMin bytes up to pipeChunks of them, more
// where a chunk would pass pipeChunkMax; each chunk is split into pieces of
// at most pipePiece bytes for the helpers; the ring holds at most
// pipeRingMax bytes.
const (
	pipeChunks   = 6
	pipeChunkMin = 256 << 10
	pipeChunkMax = 4 << 20
	pipePiece    = 128 << 10
	pipeAlign    = 4 << 10
	pipeRingMax  = 16 << 20
	// pipeWorkers bounds the helpers of a pipe (the goroutines that move
	// its bytes while the calling one talks to the driver): a memmove runs
	// at about 15-20 GB/s on one core, and a few saturate the bus.
	pipeWorkers = 8
	// leadIdleYield is how many rounds in a row the leading goroutine
	// spins without progress before it yields: it runs on the device's
	// locked thread, where a yield hands its P to another thread and
	// takes tens of microseconds to get back, so it yields seldom, for a
	// helper that may be waiting for a P.
	leadIdleYield = 1024
	// leadCopiesBelow: with fewer helpers than this the lead takes pieces
	// even once a helper has joined (one helper alone would halve the
	// copying threads of a two-core machine).
	leadCopiesBelow = 2
)

// chunkBytes is the chunk size of a region of size bytes.
func chunkBytes(size int) int {
	n := max(min((size+pipeChunkMin-1)/pipeChunkMin, pipeChunks), (size+pipeChunkMax-1)/pipeChunkMax, 1)
	c := (size + n - 1) / n
	return (c + pipeAlign - 1) / pipeAlign * pipeAlign
}

// pipePlan returns the chunk size, the chunks and the ring slots a
// transfer of a region of size bytes through a ring of ring bytes uses.
func pipePlan(size, ring int) (chunk, n, slots int, err error) {
	chunk = chunkBytes(size)
	if size > ring { // at least two slots, so that the bus and the helpers overlap
		chunk = min(chunk, ring/2/pipeAlign*pipeAlign)
	}
	if chunk <= 0 || size <= 0 {
		return 0, 0, 0, errors.New("cuda: the page-locked ring holds no chunk")
	}
	n = (size + chunk - 1) / chunk
	return chunk, n, min(n, ring/chunk), nil
}

// streamMax is the largest region whose upload writes the ring (or, for
// a staged upload, the page-locked buffer) with non-temporal stores
// (ntcopy), so that the bus reads the chunks from memory rather than out
// of the CPU's caches; larger ones are written by memmove. Measured on the H200's host (docs/BENCHMARKS.md): 3 MB went
// from 258-312 to 187-204 µs a call streamed, 32 MB from 4.31-4.39 to
// 4.54-5.03 ms (slower). A variable so that the benchmarks can set either.
var streamMax = 4 << 20

// pipe is one transfer of a region through the ring.
type pipe struct {
	eng    hostEngine
	ring   []byte
	segs   []hostSeg
	up     bool
	size   int // region bytes
	chunk  int // bytes a chunk
	n      int // chunks
	slots  int // ring slots (at most n)
	pieces int // pieces a chunk
	piece  int // bytes a piece

	left    []atomic.Int32 // pieces of each chunk still to copy
	landed  []atomic.Bool  // each chunk's copy has completed (where pieces wait for it: awaited)
	emptied atomic.Int32   // chunks whose pieces are all copied
	helping atomic.Int32   // helpers that have joined
	// leadCopies: the lead takes pieces whether or not a helper has joined
	// (leadCopiesBelow).
	leadCopies bool
	next       atomic.Int64 // the next piece to take

	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

var pipes freelist.List[pipe]

// transfer moves a region of size bytes between the device (eng) and the
// host pieces segs (which lie inside it; bytes of the region outside them
// are left as they are on the way out, and arbitrary on the way in)
// through ring, up (to the device) or down, and returns when the host side
// is done: for an upload when every chunk's copy is queued (the ring must
// not be rewritten before the queue has run them), for a download when
// every chunk is in segs. A download's copies go behind the work queued
// before it.
func transfer(eng hostEngine, ring []byte, segs []hostSeg, size int, up bool) error {
	if size <= 0 {
		return nil
	}
	p := pipes.Get()
	defer p.release()
	p.eng, p.ring, p.segs, p.up, p.size = eng, ring, segs, up, size
	var err error
	if p.chunk, p.n, p.slots, err = pipePlan(size, len(ring)); err != nil {
		return err
	}
	p.piece = min(pipePiece, max(pipeAlign, (p.chunk/pipeWorkers+pipeAlign-1)/pipeAlign*pipeAlign))
	p.pieces = (p.chunk + p.piece - 1) / p.piece
	p.left, p.landed = freelist.Grow(p.left, p.n), freelist.Grow(p.landed, p.n)
	for c := range p.n {
		p.left[c].Store(int32(p.pieces))
		p.landed[c].Store(false)
	}
	p.emptied.Store(0)
	p.helping.Store(0)
	p.next.Store(0)
	p.failed.Store(false)
	p.err = nil
	total := p.n * p.pieces
	helpers := min(pipeWorkers, runtime.GOMAXPROCS(0)-1, total)
	if p.size < 2*pipePiece {
		helpers = 0
	}
	p.leadCopies = helpers < leadCopiesBelow
	par.Default.Run(helpers, p)
	return p.err
}

// release drops the pipe's references and returns it to the free list.
func (p *pipe) release() {
	p.eng, p.ring, p.segs, p.err = nil, nil, nil, nil
	pipes.Put(p)
}

// fail records err (the first one wins) and stops the pipe.
func (p *pipe) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.failed.Store(true)
}

// span is chunk c's bytes of the region.
func (p *pipe) span(c int) (lo, hi int) {
	lo = c * p.chunk
	return lo, min(lo+p.chunk, p.size)
}

// slotBytes is the ring memory of chunk c's slot, as long as the chunk.
func (p *pipe) slotBytes(c int) []byte {
	lo, hi := p.span(c)
	off := (c % p.slots) * p.chunk
	return p.ring[off : off+hi-lo]
}

// queue issues chunk c's copy and, where pieces wait for it (awaited),
// records the slot's event.
func (p *pipe) queue(c int) {
	if p.failed.Load() {
		return
	}
	lo, _ := p.span(c)
	var err error
	if p.up {
		err = p.eng.toDevice(lo, p.slotBytes(c))
	} else {
		err = p.eng.toHost(p.slotBytes(c), lo)
	}
	if err == nil && p.awaited(c) {
		err = p.eng.record(c % p.slots)
	}
	if err != nil {
		p.fail(err)
	}
}

// Yields reports that the pipe's Works wait inside (par.Yielding): on
// each other's chunks, and the calling goroutine in the driver.
func (p *pipe) Yields() bool { return true }

// ready reports whether piece work may touch chunk c's slot: on the way
// in, once the chunk that used the slot before has been copied out of it
// (none for the first slots' chunks); on the way out, once chunk c's copy
// has landed in it.
func (p *pipe) ready(c int) bool {
	switch {
	case p.up && c < p.slots:
		return true
	case p.up:
		return p.landed[c-p.slots].Load()
	}
	return p.landed[c].Load()
}

// Work: the helpers (w > 0) take pieces in order until none is left, each
// once its chunk is ready, and copy it; the calling goroutine leads (lead).
func (p *pipe) Work(w int) {
	if w == 0 {
		p.lead()
		return
	}
	p.helping.Add(1)
	total := int64(p.n * p.pieces)
	for i := p.next.Add(1) - 1; i < total; i = p.next.Add(1) - 1 {
		c := int(i) / p.pieces
		for spins := 0; !p.ready(c); spins++ {
			if p.failed.Load() {
				return
			}
			if spins%16 == 15 {
				runtime.Gosched()
			}
		}
		p.copyPieceAt(int(i))
	}
}

// lead is the calling goroutine's part: it queues every chunk's copy as
// soon as the chunk may go (on the way in, its pieces copied; on the way
// out, its slot emptied of the chunk before, the first slots' chunks at
// once), and marks the chunks the pieces wait for done as their copies
// complete (polling the slots' events in order); between, until a helper
// joins, it takes pieces itself, so that a pipe no helper joined still
// ends (once helpers work, a piece on the lead would hold its chunk back
// behind the driver calls; with a single helper it goes on taking them).
// It returns once every chunk is queued and, on the way out, every chunk
// copied out.
func (p *pipe) lead() {
	total := int64(p.n * p.pieces)
	queued, done := 0, 0 // chunks queued; chunks known complete, in order
	mine := int64(-1)    // a piece taken and not yet copied
	if !p.up {
		for ; queued < p.slots; queued++ {
			p.queue(queued)
		}
	}
	for idle := 0; !p.failed.Load(); {
		moved := false
		for queued < p.n && p.mayQueue(queued) {
			p.queue(queued)
			queued++
			moved = true
		}
		for done < queued && p.awaited(done) {
			ok, err := p.eng.done(done % p.slots)
			if err != nil {
				p.fail(err)
				return
			}
			if !ok {
				break
			}
			p.landed[done].Store(true)
			done++
			moved = true
		}
		if queued == p.n && (p.up || int(p.emptied.Load()) == p.n) {
			return
		}
		if mine < 0 && (p.leadCopies || p.helping.Load() == 0) {
			if i := p.next.Add(1) - 1; i < total {
				mine = i
			}
		}
		if mine >= 0 && p.ready(int(mine)/p.pieces) {
			p.copyPieceAt(int(mine))
			mine = -1
			moved = true
		}
		if moved {
			idle = 0
		} else if idle++; idle%leadIdleYield == 0 {
			runtime.Gosched()
		}
	}
}

// mayQueue reports whether chunk c's copy may be queued: on the way in,
// once its pieces are in the ring; on the way out, once the chunk before
// it in its slot has been copied out.
func (p *pipe) mayQueue(c int) bool {
	if p.up {
		return p.left[c].Load() == 0
	}
	return p.left[c-p.slots].Load() == 0
}

// awaited reports whether pieces wait for chunk c's copy to complete (and
// its slot's event was recorded for it): every chunk on the way out, on
// the way in those whose slot a later chunk reuses.
func (p *pipe) awaited(c int) bool { return !p.up || c+p.slots < p.n }

// copyPieceAt copies piece i (piece i % pieces of chunk i / pieces) and
// counts it done.
func (p *pipe) copyPieceAt(i int) {
	c, j := i/p.pieces, i%p.pieces
	lo, hi := p.span(c)
	a, b := lo+j*p.piece, min(lo+(j+1)*p.piece, hi)
	if a < b {
		p.copyPiece(p.slotBytes(c), lo, a, b)
	}
	if p.left[c].Add(-1) == 0 {
		p.emptied.Add(1)
	}
}

// copyPiece copies the region's bytes [a, b) between the host pieces and
// slot, the ring memory of the chunk that starts at byte lo.
func (p *pipe) copyPiece(slot []byte, lo, a, b int) {
	for _, s := range p.segs {
		x, y := max(a, s.off), min(b, s.off+len(s.host))
		if x >= y {
			continue
		}
		ring, host := slot[x-lo:y-lo], s.host[x-s.off:y-s.off]
		switch {
		case p.up && p.size <= streamMax:
			ntcopy.Copy(ring, host)
		case p.up:
			copy(ring, host)
		default:
			copy(host, ring)
		}
	}
}
