package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/fp8attn/fp8attn/internal/par"
	"github.com/fp8attn/fp8attn/internal/seed"
)

// fakeEngine is a device for the pipes without a GPU: device memory is a
// byte slice, and the copies run on a goroutine of their own, in order,
// each after a random delay and reading or writing the ring only when it
// runs, as a DMA engine does; so a ring slot rewritten before its copy
// has run, or read before its copy has landed, shows in the bytes. With
// immediate set, each copy runs as it is queued instead.
type fakeEngine struct {
	dev      []byte
	ops      chan func()
	mu       sync.Mutex
	cond     *sync.Cond
	ran      int         // ops run
	marks    map[int]int // per slot: the ops queued before its latest record
	queued   int         // ops queued
	pushed   int         // ops asked for, the refused one included
	rng      *rand.Rand  // the runner's
	fail     int         // > 0: the fail-th op asked for is refused
	failWait bool        // every wait fails (a kernel's error)
	// immediate: a copy runs the moment it is queued, on the queueing
	// goroutine, so that a slot refilled before its bytes were all read
	// shows every time, not only when the runner's delays let it.
	immediate bool
	wg        sync.WaitGroup
}

func newFakeEngine(dev []byte, rng *rand.Rand) *fakeEngine {
	e := &fakeEngine{dev: dev, ops: make(chan func(), 1<<16), marks: map[int]int{}, rng: rng}
	e.cond = sync.NewCond(&e.mu)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for op := range e.ops {
			for range e.rng.IntN(20000) { // the copy's latency
			}
			op()
			e.mu.Lock()
			e.ran++
			e.cond.Broadcast()
			e.mu.Unlock()
		}
	}()
	return e
}

func (e *fakeEngine) close() { close(e.ops); e.wg.Wait() }

func (e *fakeEngine) push(op func()) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pushed++; e.pushed == e.fail {
		return errors.New("fake: the queue failed")
	}
	e.queued++
	if e.immediate {
		op()
		e.ran++
		e.cond.Broadcast()
		return nil
	}
	e.ops <- op
	return nil
}

// toDevice and toHost copy to and from the device memory e.dev is when
// they are queued (a round trip's between may point it elsewhere, as the
// stream engine moves its base).
func (e *fakeEngine) toDevice(off int, src []byte) error {
	dev := e.dev
	return e.push(func() { copy(dev[off:off+len(src)], src) })
}

func (e *fakeEngine) toHost(dst []byte, off int) error {
	dev := e.dev
	return e.push(func() { copy(dst, dev[off:off+len(dst)]) })
}

func (e *fakeEngine) record(slot int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.marks[slot] = e.queued
	return nil
}

func (e *fakeEngine) done(slot int) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failWait {
		return false, errors.New("fake: a kernel failed")
	}
	return e.ran >= e.marks[slot], nil
}

// drain waits for every queued op.
func (e *fakeEngine) drain() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.ran < e.queued {
		e.cond.Wait()
	}
}

// transfer moves a region of size bytes through ring one way, as a leg
// of a round trip does (its host pieces segs inside it), and returns when
// the host side is done: for an upload when every chunk's copy is queued
// (its prologue's items all run), for a download when every chunk is in
// segs.
func transfer(eng hostEngine, ring []byte, segs []hostSeg, size int, up bool) error {
	return transferAfter(eng, ring, segs, size, up, nil)
}

// transferAfter is transfer with an upload's prologue.
func transferAfter(eng hostEngine, ring []byte, segs []hostSeg, size int, up bool, pro prologue) error {
	if size <= 0 {
		return nil
	}
	var p pipe
	helpers, err := p.plan(eng, ring, segs, size, up, pro, 0)
	if err != nil {
		return err
	}
	par.Default.Run(helpers, &p)
	return p.err
}

// TestTransfer: a region goes to the device and comes back through rings
// smaller and larger than it, chunk by chunk: every byte of the host
// pieces lands at its offset on the way in (what lies between them is not
// asked for), and every byte of the pieces comes back from its offset on
// the way out, nothing outside them written; sizes of one byte, of a
// chunk, past a chunk, of many chunks through a ring of two or three
// slots, with gaps between the pieces and an empty one. A ring slot reused
// before its copy ran, or read before its copy landed, fails it (the
// mutants in TestHostPipeCatchesMutants). The lead-alone cases move
// regions below 2·pipePiece bytes, which no helper joins, so that the
// calling goroutine copies every piece in order, through rings of two and
// three slots of two pieces or more, against an engine whose copies run
// the moment they are queued: a download that queues a chunk into a slot
// while a piece of the chunk before is still to be copied out of it, or an
// upload that queues a chunk's copy before its last piece is in the slot,
// fails them on every run, not only when the runner's delays let it.
func TestTransfer(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 70))
	for _, tc := range []struct {
		name  string
		sizes []int // the pieces, each after a gap of 0-300 bytes
		ring  int
		alone bool // the lead alone, copies run as queued
	}{
		{"one byte", []int{1}, pipeChunkMin, false},
		{"small pieces", []int{5, 0, 777, 4}, 1 << 20, false},
		{"one chunk", []int{pipeChunkMin}, pipeChunkMin, false},
		{"past a chunk", []int{pipeChunkMin + 1}, 1 << 20, false},
		{"mission", []int{1 << 20, 1 << 20, 1 << 20, 4}, 4 << 20, false},
		{"two-slot ring", []int{3 << 20, 1 << 20, 1 << 20, 4}, 2 * pipeChunkMin, false},
		{"three-slot ring", []int{5<<20 + 13, 700 << 10, 3}, 3 * chunkBytes(6<<20), false},
		{"many chunks", []int{30 << 20, 9 << 20}, 16 << 20, false},
		{"lead alone, two slots", []int{100 << 10, 50<<10 + 7}, 2 * 8 << 10, true},
		{"lead alone, three slots", []int{200 << 10}, 3 * 12 << 10, true},
		{"lead alone, two slots, many pieces", []int{3, 150 << 10, 9}, 2 * 32 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFakeEngine(nil, rand.New(rand.NewPCG(sd, 71)))
			e.immediate = tc.alone
			defer e.close()
			p := transferBothWays(t, e, rng, tc.sizes, tc.ring)
			if tc.alone && (p.helpers != 0 || p.pieces < 2 || p.n <= p.slots) {
				t.Fatalf("the case plans %d helpers, %d pieces a chunk, %d chunks in %d slots: not the lead alone over reused slots", p.helpers, p.pieces, p.n, p.slots)
			}
		})
	}
}

// bothWaysPlan is what transferBothWays' download planned.
type bothWaysPlan struct{ helpers, pieces, n, slots int }

// transferBothWays moves random host pieces of the given sizes (each
// after a gap of 0-300 bytes) to e's device memory through a ring of
// ringBytes and fresh device bytes back into guarded host pieces, and
// fails t where a byte of a piece differs or a byte outside one is
// written. It returns the download's plan.
func transferBothWays(t *testing.T, e *fakeEngine, rng *rand.Rand, sizes []int, ringBytes int) bothWaysPlan {
	t.Helper()
	var segs []hostSeg
	size := 0
	for _, n := range sizes {
		size += rng.IntN(300)
		h := make([]byte, n)
		for i := range h {
			h[i] = byte(rng.Uint32())
		}
		segs = append(segs, hostSeg{off: size, host: h})
		size += n
	}
	ring := make([]byte, ringBytes)
	dev := make([]byte, size)
	e.dev = dev
	if err := transfer(e, ring, segs, size, true); err != nil {
		t.Fatal(err)
	}
	e.drain()
	for i, s := range segs {
		if !bytes.Equal(dev[s.off:s.off+len(s.host)], s.host) {
			t.Fatalf("upload: piece %d (%d bytes at %d) differs on the device", i, len(s.host), s.off)
		}
	}
	// The way back: fresh device bytes into guarded host pieces.
	for i := range dev {
		dev[i] = byte(rng.Uint32())
	}
	var back []hostSeg
	var guards [][]byte
	for _, s := range segs {
		g := make([]byte, len(s.host)+2)
		g[0], g[len(g)-1] = 0xA5, 0x5A
		back, guards = append(back, hostSeg{off: s.off, host: g[1 : len(g)-1]}), append(guards, g)
	}
	var p pipe
	helpers, err := p.plan(e, ring, back, size, false, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := transfer(e, ring, back, size, false); err != nil {
		t.Fatal(err)
	}
	for i, s := range back {
		if !bytes.Equal(s.host, dev[s.off:s.off+len(s.host)]) {
			t.Fatalf("download: piece %d (%d bytes at %d) differs from the device", i, len(s.host), s.off)
		}
		if g := guards[i]; g[0] != 0xA5 || g[len(g)-1] != 0x5A {
			t.Fatalf("download: piece %d wrote outside its bytes", i)
		}
	}
	return bothWaysPlan{helpers, p.pieces, p.n, p.slots}
}

// TestTransferFails: a copy the queue refuses, or a wait that fails (a
// kernel's error), is the transfer's error, whichever chunk it hits, both
// ways, and nothing hangs.
func TestTransferFails(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed.Get(), 72))
	size := 9 << 20
	host := make([]byte, size)
	for _, up := range []bool{true, false} {
		for _, at := range []int{1, 2, 4, 6, -1} { // -1: the first wait fails
			t.Run(fmt.Sprintf("up=%v/op%d", up, at), func(t *testing.T) {
				ring := make([]byte, 2*chunkBytes(size))
				e := newFakeEngine(make([]byte, size), rng)
				defer e.close()
				e.fail, e.failWait = at, at < 0
				if err := transfer(e, ring, []hostSeg{{off: 0, host: host}}, size, up); err == nil {
					t.Fatalf("op %d failed, the transfer did not", at)
				}
				e.drain()
			})
		}
	}
}

// TestChunkBytes: chunks are whole pages of at most pipeChunkMax bytes,
// not below half of pipeChunkMin unless the region is; a region takes one
// per pipeChunkMin bytes, at most pipeChunks below pipeChunks·pipeChunkMax,
// and its last chunk is not a sliver.
func TestChunkBytes(t *testing.T) {
	for _, size := range []int{1, 4096, pipeChunkMin, 3<<20 + 260, 1<<20 + 256, 96 << 20, 1 << 34} {
		c := chunkBytes(size)
		n := (size + c - 1) / c
		switch {
		case c%pipeAlign != 0 || c > pipeChunkMax || 2*c < min(size, pipeChunkMin):
			t.Errorf("size %d: chunk %d", size, c)
		case size <= pipeChunks*pipeChunkMax && n > pipeChunks:
			t.Errorf("size %d: %d chunks of %d", size, n, c)
		case n > 1 && size-(n-1)*c < c/2:
			t.Errorf("size %d: %d chunks of %d, the last of %d", size, n, c, size-(n-1)*c)
		}
	}
}
