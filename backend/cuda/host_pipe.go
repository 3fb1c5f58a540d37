package cuda

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/par"
)

// A host-slice call moves its float32 inputs to the device and its output
// back through page-locked memory, once each way, in chunks: a region of
// device memory (the inputs, or the outputs) is cut into chunks, each
// chunk goes through one slot of a page-locked ring, and the ring's slots
// are reused once the copy that read (or wrote) them has completed. The
// memmoves between Go memory and the ring run on the helpers of
// par.Default, a small piece at a time; the DMA of a chunk is issued by
// whichever goroutine finishes its last piece, so that on the way in the
// bus copies chunk i while the helpers fill chunk i+1, and on the way out
// they empty chunk i while the bus fills chunk i+1.

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
	// wait returns once the work before slot's latest record has completed.
	wait(slot int) error
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
	// pipeWorkers bounds the goroutines of a pipe: a memmove runs at about
	// 15 GB/s on one core, and a few saturate the bus.
	pipeWorkers = 8
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

// Chunk states.
const (
	chunkIdle   = iota // its copy is not queued yet
	chunkQueued        // its copy is queued (and its slot's event recorded)
	chunkDone          // its copy has completed
)

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

	left  []atomic.Int32 // pieces of each chunk still to copy
	state []atomic.Int32 // each chunk's state
	next  atomic.Int64   // the next piece to take

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
	p.left, p.state = freelist.Grow(p.left, p.n), freelist.Grow(p.state, p.n)
	for c := range p.n {
		p.left[c].Store(int32(p.pieces))
		p.state[c].Store(chunkIdle)
	}
	p.next.Store(0)
	p.failed.Store(false)
	p.err = nil
	total := p.n * p.pieces
	helpers := min(pipeWorkers, runtime.GOMAXPROCS(0), total) - 1
	if p.size < 2*pipePiece {
		helpers = 0
	}
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

// queue issues chunk c's copy and, where a later chunk will reuse its slot
// or read it, records the slot's event.
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
	if err == nil && (!p.up || c+p.slots < p.n) {
		err = p.eng.record(c % p.slots)
	}
	if err != nil {
		p.fail(err)
		return
	}
	p.state[c].Store(chunkQueued)
}

// await returns once chunk c's copy has completed (false if the pipe
// failed first).
func (p *pipe) await(c int) bool {
	for i := 0; ; i++ {
		switch p.state[c].Load() {
		case chunkDone:
			return true
		case chunkQueued:
			if err := p.eng.wait(c % p.slots); err != nil {
				p.fail(err)
				return false
			}
			p.state[c].Store(chunkDone)
			return true
		}
		if p.failed.Load() {
			return false
		}
		if i%16 == 15 {
			runtime.Gosched()
		}
	}
}

// Work takes pieces in order until none is left. A piece of an upload
// waits for its slot's previous chunk to be on the device, then fills its
// bytes; one of a download waits for its chunk to be in the ring, then
// empties its bytes. The goroutine that finishes a chunk's last piece
// queues the chunk's copy (upload) or the next chunk of its slot
// (download). The calling goroutine (w 0) first queues a download's first
// chunk of each slot, while the helpers join.
func (p *pipe) Work(w int) {
	if !p.up && w == 0 {
		for c := range p.slots {
			p.queue(c)
		}
	}
	total := int64(p.n * p.pieces)
	for i := p.next.Add(1) - 1; i < total; i = p.next.Add(1) - 1 {
		if p.failed.Load() {
			return
		}
		c, j := int(i)/p.pieces, int(i)%p.pieces
		switch {
		case p.up && c >= p.slots:
			if !p.await(c - p.slots) {
				return
			}
		case !p.up:
			if !p.await(c) {
				return
			}
		}
		lo, hi := p.span(c)
		a, b := lo+j*p.piece, min(lo+(j+1)*p.piece, hi)
		if a < b {
			p.copyPiece(p.slotBytes(c), lo, a, b)
		}
		if p.left[c].Add(-1) != 0 {
			continue
		}
		switch {
		case p.up:
			p.queue(c)
		case c+p.slots < p.n:
			p.queue(c + p.slots)
		}
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
		if p.up {
			copy(ring, host)
		} else {
			copy(host, ring)
		}
	}
}
