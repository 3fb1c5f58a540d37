package cuda

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fp8attn/fp8attn/internal/freelist"
	"github.com/fp8attn/fp8attn/internal/half"
	"github.com/fp8attn/fp8attn/internal/ntcopy"
	"github.com/fp8attn/fp8attn/internal/par"
)

// A host-slice call moves its inputs to the device and its output back
// through page-locked memory, once each way, in chunks: a region of
// device memory (the inputs, or the outputs) is cut into chunks, each
// chunk goes through one slot of a page-locked ring, and the ring's slots
// are reused once the copy that read (or wrote) them has completed. The
// memmoves between Go memory and the ring, and the encoding of float32
// inputs into E4M3 codes there (encodeSrc, after a prologue that computes
// their scales), run on the helpers of par.Default, a small piece at a
// time, so that on the way in the bus copies chunk i while the helpers
// fill chunk i+1, and on the way out they empty chunk i while the bus
// fills chunk i+1. A round trip (roundTrip) runs both ways and the launch
// between them in one fork-join. The calling goroutine is the pipe's one
// voice to the device: it queues each chunk's copy once its pieces are
// done and learns when each copy has completed, polling, and takes tasks
// (pieces, prologue items) itself while no helper has joined, or beside a
// single one (leadCopiesBelow); the helpers only move or encode bytes and
// watch the chunks' states. The way in copies host bytes of a region of a
// few megabytes into the ring with non-temporal stores (streamMax): the
// bus read lines that a memmove had just left in the CPU's caches at half
// its speed (the encoder's codes are written with ordinary stores).
// Driver calls from several threads at once serialize in
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

// phaser is a hostEngine that notes the phases of a call between its
// copies (a benchmark's timeline): points in time, and the time the
// goroutines spent in each kind of task, summed over the call.
type phaser interface {
	phase(what string)
	tally(what string, d time.Duration)
}

// hostSeg is one piece of a region: its bytes [off, off+len(host)) are
// host's (the source of an upload, the destination of a download), or, in
// an upload, the enc.x's codes, encoded on the way (host nil).
type hostSeg struct {
	off  int
	host []byte
	enc  *encodeSrc
	dec  *halfDst // (the way down) float16 in the region, float32 in dec.out
	// after marks host bytes the upload's prologue writes (the scales it
	// computes): the pieces that copy them wait for all of its items.
	after bool
}

// size is the bytes of the region the piece covers.
func (s hostSeg) size() int {
	switch {
	case s.enc != nil:
		return len(s.enc.x)
	case s.dec != nil:
		return 2 * len(s.dec.out)
	}
	return len(s.host)
}

// halfDst is a float16 output on the way down: its values land in out as
// float32, each times unit (half.Decode), the inverse of the factor the
// device multiplied them by (half.Scale). Pieces start at even offsets of
// the region (multiples of pipeAlign from segments aligned to
// stagingAlign).
type halfDst struct {
	out          []float32
	factor, unit float32
}

// A prologue is work an upload's goroutines share with its pieces (the
// amax of each head whose codes the pieces encode, in the region's order
// of the heads): items independent of each other, each run once. A piece
// waits for the items its bytes need: those of the heads it encodes
// (encodeSrc.items), all of them for the bytes they write
// (hostSeg.after); the work order (pipe.work) puts the items of each
// chunk and of the next (itemLookahead) before its pieces, and the upload
// ends only once every item has run.
type prologue interface {
	items() int
	item(i int)
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
	// pipeEncodeWorkers bounds the helpers of an upload that encodes
	// codes: the cores bound it more than the memory's bandwidth, but on
	// the H200's 16-core host 12 helpers took a mission call 162 µs, 15
	// took 195-204 µs (the driver and the calling goroutine's thread
	// lose their cores; docs/BENCHMARKS.md).
	pipeEncodeWorkers = 12
	// encodeWeight is the host's bytes of work a region byte of codes
	// costs against a copied one (the float32 it is encoded from).
	encodeWeight = 4
	// helperIdleYield is how many rounds in a row a helper waits for its
	// chunk before it yields (runtime.Gosched): a dozen helpers yielding
	// every few rounds queued on the scheduler's lock.
	helperIdleYield = 1024
	// leadIdleYield is how many rounds in a row the leading goroutine
	// spins without progress before it yields: it runs on the device's
	// locked thread, where a yield hands its P to another thread and
	// takes tens of microseconds to get back, so it yields seldom, for a
	// helper that may be waiting for a P.
	leadIdleYield = 1024
	// itemLookahead is how many chunks ahead of a chunk's pieces the work
	// puts the prologue items of the chunks after it: with 0 a chunk's
	// pieces would follow its own items, and the goroutines that take
	// them wait for items just taken; with 1 those items were taken a
	// chunk's pieces before (the mission call 131-133 µs against 141 in
	// its timeline, docs/BENCHMARKS.md).
	itemLookahead = 1
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
// transfer of a region of size bytes through a ring of ring bytes uses,
// each region byte costing weight bytes of the host's work (4 for a code
// encoded from a float32): chunks are cut as for a region of weight·size
// bytes.
func pipePlan(size, ring, weight int) (chunk, n, slots int, err error) {
	chunk = (chunkBytes(weight*size)/weight + pipeAlign - 1) / pipeAlign * pipeAlign
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
	eng        hostEngine
	ph         phaser // eng's, or nil
	ring       []byte
	segs       []hostSeg
	up         bool
	pro        prologue // (nil: none)
	proN       int      // its items
	size       int      // region bytes
	yieldEvery int
	chunk      int // bytes a chunk
	n          int // chunks
	slots      int // ring slots (at most n)
	pieces     int // pieces a chunk
	piece      int // bytes a piece

	// work is the order of the tasks the goroutines take (next) where
	// there is a prologue: -1-i for item i, k >= 0 for piece k (piece k %
	// pieces of chunk k / pieces); each chunk's pieces after the items
	// they wait for and those of the itemLookahead chunks after it.
	// Without one, piece k is task k.
	work    []int32
	proDone []atomic.Bool  // each prologue item has returned
	proLeft atomic.Int32   // items still to run (counted where ph is not nil)
	need    [][2]int       // the prologue items [lo, hi) each chunk's pieces wait for
	proOK   []atomic.Bool  // each chunk's items are known done
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

// roundTrip is a call's whole way through the ring in one fork-join: the
// upload of the up region (up bytes, upSegs, with its prologue), then,
// on the calling goroutine once every chunk of it is queued, between
// (the kernels' launch), then the download of the down region, whose
// copies go behind what between queued; it returns once every chunk of
// the download is in downSegs. Each leg moves a region between the device
// (eng) and its host pieces (which lie inside it: bytes of the region
// outside them are arbitrary on the way in, left as they are on the way
// out) through ring; the ring is not rewritten before the queue has run
// the copies that read it. The helpers go from the upload's
// pieces to the download's without returning to the pool, and no
// goroutine waits for another between the two. An error of between stops
// the download and is roundTrip's.
func roundTrip(eng hostEngine, ring []byte, upSegs []hostSeg, up int, pro prologue, between func() error, downSegs []hostSeg, down int) error {
	if up <= 0 || down <= 0 {
		return errors.New("cuda: a round trip with nothing to move one way")
	}
	x := roundTrips.Get()
	defer x.release()
	hu, err := x.up.plan(eng, ring, upSegs, up, true, pro, 0)
	if err != nil {
		return err
	}
	hd, err := x.down.plan(eng, ring, downSegs, down, false, nil, hu)
	if err != nil {
		return err
	}
	if x.up.ph != nil {
		x.up.ph.phase("planned")
	}
	x.between = between
	par.Default.Run(max(hu, hd), x)
	if x.up.err != nil {
		return x.up.err
	}
	return x.down.err
}

// duplex is a round trip's job: its two pipes and what runs between them.
type duplex struct {
	up, down pipe
	between  func() error
}

var roundTrips freelist.List[duplex]

func (x *duplex) release() {
	x.up.clear()
	x.down.clear()
	x.between = nil
	roundTrips.Put(x)
}

// Yields: as the pipes' Works.
func (x *duplex) Yields() bool { return true }

// LeadSpins: the calling goroutine holds the device's locked thread
// (par.LeadSpinner).
func (x *duplex) LeadSpins() bool { return true }

// Work leads both pipes on the calling goroutine (w = 0), between them
// running between; helpers work on the upload, then on the download.
func (x *duplex) Work(w int) {
	if w > 0 {
		if x.up.ph != nil {
			x.up.ph.phase("joined")
		}
		x.up.Work(w)
		x.down.Work(w)
		if x.up.ph != nil {
			x.up.ph.phase("helper done")
		}
		return
	}
	if x.up.ph != nil {
		x.up.ph.phase("lead")
	}
	x.up.lead()
	if x.up.failed.Load() {
		x.down.fail(errors.New("cuda: the upload failed")) // (the helpers leave the download)
		return
	}
	if err := x.between(); err != nil {
		x.down.fail(err)
		return
	}
	x.down.lead()
	if ph, ok := x.down.eng.(phaser); ok {
		ph.phase("down led")
	}
}

// plan readies p for a transfer (see transferAfter) and returns how many
// helpers it takes. An upload with encoded pieces plans its chunks and
// pieces by the float32 bytes they read (a chunk of codes is a quarter of
// a copied chunk) and takes up to pipeEncodeWorkers helpers (encoding is
// bound by the cores, not by the memory's bandwidth). share, where larger
// than that bound (pipeWorkers or pipeEncodeWorkers), is how many
// goroutines will work on it (a round trip's download, whose helpers are
// the upload's): its pieces are cut for them all, so that the last
// chunk's are spread over every one.
func (p *pipe) plan(eng hostEngine, ring []byte, segs []hostSeg, size int, up bool, pro prologue, share int) (helpers int, err error) {
	p.eng, p.ring, p.segs, p.up, p.size, p.pro, p.proN = eng, ring, segs, up, size, pro, 0
	p.ph, _ = eng.(phaser)
	if pro != nil {
		p.proN = pro.items()
	}
	p.proLeft.Store(int32(p.proN))
	weight, workers := 1, pipeWorkers
	if up && encodes(segs) {
		weight, workers = encodeWeight, pipeEncodeWorkers
	}
	if p.chunk, p.n, p.slots, err = pipePlan(size, len(ring), weight); err != nil {
		return 0, err
	}
	cut := max(workers, share)
	p.piece = min(pipePiece/weight, max(pipeAlign, (p.chunk/cut+pipeAlign-1)/pipeAlign*pipeAlign))
	p.pieces = (p.chunk + p.piece - 1) / p.piece
	p.left, p.landed = freelist.Grow(p.left, p.n), freelist.Grow(p.landed, p.n)
	for c := range p.n {
		p.left[c].Store(int32(p.pieces))
		p.landed[c].Store(false)
	}
	p.planPrologue()
	p.emptied.Store(0)
	p.helping.Store(0)
	p.next.Store(0)
	p.failed.Store(false)
	p.err = nil
	total := p.proN + p.n*p.pieces
	helpers = min(workers, runtime.GOMAXPROCS(0)-1, total)
	if weight*p.size < 2*pipePiece {
		helpers = 0
	}
	p.leadCopies = helpers < leadCopiesBelow
	return helpers, nil
}

// planPrologue finds the prologue items each chunk's pieces wait for.
func (p *pipe) planPrologue() {
	p.proDone = freelist.Grow(p.proDone, p.proN)
	for i := range p.proDone {
		p.proDone[i].Store(false)
	}
	p.need, p.proOK = freelist.Grow(p.need, p.n), freelist.Grow(p.proOK, p.n)
	for c := range p.n {
		lo, hi := p.span(c)
		need := [2]int{p.proN, 0}
		for _, s := range p.segs {
			x, y := max(lo, s.off), min(hi, s.off+s.size())
			if p.proN == 0 || x >= y {
				continue
			}
			switch {
			case s.after:
				need = [2]int{0, p.proN}
			case s.enc != nil && s.enc.item0 >= 0:
				a, b := s.enc.items(x-s.off, y-s.off)
				need = [2]int{min(need[0], a), max(need[1], b)}
			}
		}
		p.need[c] = need
		p.proOK[c].Store(need[1] <= need[0])
	}
	p.work = p.work[:0]
	if p.proN == 0 {
		return
	}
	item := 0
	for c := range p.n {
		upTo := 0 // the items of chunks c to c+itemLookahead
		for a := c; a <= min(c+itemLookahead, p.n-1); a++ {
			upTo = max(upTo, p.need[a][1])
		}
		for ; item < upTo; item++ {
			p.work = append(p.work, int32(-1-item))
		}
		for j := range p.pieces {
			p.work = append(p.work, int32(c*p.pieces+j))
		}
	}
	for ; item < p.proN; item++ {
		p.work = append(p.work, int32(-1-item))
	}
}

// task is the i-th task of the work: prologue item item (piece -1), or
// piece piece (item -1).
func (p *pipe) task(i int64) (item, piece int) {
	switch {
	case len(p.work) > 0:
		if k := int(p.work[i]); k < 0 {
			return -1 - k, -1
		} else {
			return -1, k
		}
	}
	return -1, int(i)
}

// clear drops the pipe's references (a pipe of a round trip).
func (p *pipe) clear() {
	p.eng, p.ph, p.ring, p.segs, p.pro, p.err = nil, nil, nil, nil, nil, nil
}

// encodes reports whether any of segs is encoded on the way.
func encodes(segs []hostSeg) bool {
	for _, s := range segs {
		if s.enc != nil {
			return true
		}
	}
	return false
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
	case !p.itemsDone(c):
		return false
	case p.up && c < p.slots:
		return true
	case p.up:
		return p.landed[c-p.slots].Load()
	}
	return p.landed[c].Load()
}

// Work: the helpers (w > 0) take tasks in the work's order until none is
// left: a prologue item they run at once, a piece once its chunk is ready;
// the calling goroutine leads (lead).
func (p *pipe) Work(w int) {
	if w == 0 {
		p.lead()
		return
	}
	p.helping.Add(1)
	total := int64(p.proN + p.n*p.pieces)
	for i := p.next.Add(1) - 1; i < total; i = p.next.Add(1) - 1 {
		item, k := p.task(i)
		if item >= 0 {
			p.runItem(item)
			continue
		}
		for spins := 0; !p.ready(k / p.pieces); spins++ {
			if p.failed.Load() {
				return
			}
			if spins%helperIdleYield == helperIdleYield-1 {
				runtime.Gosched()
			}
			par.Pause()
		}
		p.copyPieceAt(k)
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
	total := int64(p.proN + p.n*p.pieces)
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
		if queued == p.n && (p.up && p.prologueDone() || !p.up && int(p.emptied.Load()) == p.n) {
			return
		}
		if mine < 0 && (p.leadCopies || p.helping.Load() == 0) {
			if i := p.next.Add(1) - 1; i < total {
				mine = i
			}
		}
		if mine >= 0 {
			if item, k := p.task(mine); item >= 0 {
				p.runItem(item)
				mine, moved = -1, true
			} else if p.ready(k / p.pieces) {
				p.copyPieceAt(k)
				mine, moved = -1, true
			}
		}
		if moved {
			idle = 0
		} else if idle++; idle%leadIdleYield == 0 {
			runtime.Gosched()
		} else {
			par.Pause()
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

// runItem runs prologue item i and marks it done.
func (p *pipe) runItem(i int) {
	t := p.clock()
	p.pro.item(i)
	p.proDone[i].Store(true)
	if p.ph != nil {
		p.ph.tally("items", time.Since(t))
		if p.proLeft.Add(-1) == 0 {
			p.ph.phase("items done")
		}
	}
}

// clock is the time now where a phaser times the pipe's tasks, and the
// zero time (no clock read) otherwise.
func (p *pipe) clock() time.Time {
	if p.ph == nil {
		return time.Time{}
	}
	return time.Now()
}

// prologueDone reports whether every prologue item has returned (those
// no chunk waits for included, which only the work's end has).
func (p *pipe) prologueDone() bool {
	for i := range p.proDone {
		if !p.proDone[i].Load() {
			return false
		}
	}
	return true
}

// itemsDone reports whether the prologue items chunk c's pieces wait
// for have returned.
func (p *pipe) itemsDone(c int) bool {
	if p.proOK[c].Load() {
		return true
	}
	for i := p.need[c][0]; i < p.need[c][1]; i++ {
		if !p.proDone[i].Load() {
			return false
		}
	}
	if p.proOK[c].CompareAndSwap(false, true) && p.ph != nil && c == 0 {
		p.ph.phase("chunk 0's items")
	}
	return true
}

// copyPieceAt copies piece i (piece i % pieces of chunk i / pieces) and
// counts it done.
func (p *pipe) copyPieceAt(i int) {
	c, j := i/p.pieces, i%p.pieces
	lo, hi := p.span(c)
	a, b := lo+j*p.piece, min(lo+(j+1)*p.piece, hi)
	if a < b {
		t := p.clock()
		p.copyPiece(p.slotBytes(c), lo, a, b)
		if p.ph != nil && p.up {
			p.ph.tally("pieces up", time.Since(t))
		} else if p.ph != nil {
			p.ph.tally("pieces down", time.Since(t))
		}
	}
	if p.left[c].Add(-1) == 0 {
		p.emptied.Add(1)
	}
}

// copyPiece copies the region's bytes [a, b) between the host pieces and
// slot, the ring memory of the chunk that starts at byte lo.
func (p *pipe) copyPiece(slot []byte, lo, a, b int) {
	for _, s := range p.segs {
		x, y := max(a, s.off), min(b, s.off+s.size())
		if x >= y {
			continue
		}
		if s.enc != nil {
			s.enc.encode(slot[x-lo:y-lo], x-s.off)
			continue
		}
		if s.dec != nil {
			half.Decode(s.dec.out[(x-s.off)/2:(y-s.off)/2], slot[x-lo:y-lo], s.dec.unit)
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
