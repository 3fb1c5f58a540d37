package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/half"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/internal/seed"
)

// slowPrologue runs the items of a prologue late: the first after a
// millisecond, a third of the others after half of one, the rest after a
// short random spin; so that a piece that does not wait for every item it
// needs reads a scale not yet written.
type slowPrologue struct {
	prologue
	mu  sync.Mutex
	rng *rand.Rand
}

func (s *slowPrologue) item(i int) {
	s.mu.Lock()
	n, slow := s.rng.IntN(100000), s.rng.IntN(3) == 0
	s.mu.Unlock()
	switch {
	case i == 0:
		time.Sleep(time.Millisecond)
	case slow:
		time.Sleep(500 * time.Microsecond)
	}
	for range n {
	}
	s.prologue.item(i)
}

// encodedUpload is an upload of three tensors' codes (a call's Q, K, V)
// and their scales, and the codes and scales fp8.QuantizeE4M3 gives each
// head, laid out as the region holds them.
type encodedUpload struct {
	set        encodeSet
	segs       []hostSeg
	size       int
	wantCodes  [3][]byte
	wantScales [3][]float32
	offs       [3]int
	scaleOffs  [3]int
}

// newEncodedUpload makes the upload of random tensors [b][h][s][d] (h:
// hq, then hkv twice) in layout l, a gap of a few bytes between its
// pieces, the scales after the codes or, with scalesFirst, before them;
// with computed, the scales are the prologue's to compute (zero until
// then), else given.
func newEncodedUpload(rng *rand.Rand, b, hq, hkv, s, d int, l backend.Layout, computed, scalesFirst bool) *encodedUpload {
	u := &encodedUpload{}
	off := 0
	if scalesFirst {
		off = 4*(b*hq+2*b*hkv) + 100
	}
	for i, h := range []int{hq, hkv, hkv} {
		x := make([]float32, b*h*s*d) // BHSD, each head with its own magnitude
		for g := range b * h {
			amp := math.Exp(rng.NormFloat64() * 3)
			for j := range s * d {
				x[g*s*d+j] = float32(rng.NormFloat64() * amp)
			}
		}
		if i == 1 && len(x) > 2 {
			x[1], x[len(x)-1] = float32(math.NaN()), float32(math.Inf(-1)) // ignored by the amax, NaN codes
		}
		codes, scales, _ := fp8.QuantizeE4M3(x, s*d)
		u.wantCodes[i] = unsafe.Slice((*byte)(unsafe.Pointer(&codes[0])), len(codes))
		u.wantCodes[i] = layout.Permute(u.wantCodes[i], b, h, s, d, l)
		u.wantScales[i] = scales
		given := scales
		if computed {
			given = make([]float32, len(scales))
		}
		u.set[i] = encodeSrc{x: layout.Permute(x, b, h, s, d, l), scales: given, heads: h, seq: s, d: d, layout: l, item0: -1}
		off += rng.IntN(300)
		u.offs[i] = off
		off += len(x)
	}
	if computed {
		u.set.plan(nil)
	}
	for i := range u.set {
		u.segs = append(u.segs, hostSeg{off: u.offs[i], enc: &u.set[i]})
	}
	end := off
	if scalesFirst {
		off = 0
	}
	for i := range u.set {
		off += rng.IntN(30)
		u.scaleOffs[i] = off
		u.segs = append(u.segs, hostSeg{off: off, host: bytesOf(u.set[i].scales), after: computed})
		off += 4 * len(u.set[i].scales)
	}
	u.size = max(off, end)
	return u
}

// check compares the device's region with the codes and scales wanted.
func (u *encodedUpload) check(dev []byte) error {
	for i := range u.set {
		got := dev[u.offs[i] : u.offs[i]+len(u.wantCodes[i])]
		for j := range got {
			if got[j] != u.wantCodes[i][j] {
				return fmt.Errorf("tensor %d: code %d is %#x, want %#x", i, j, got[j], u.wantCodes[i][j])
			}
		}
		for j, want := range u.wantScales[i] {
			at := u.scaleOffs[i] + 4*j
			if got := math.Float32frombits(uint32(dev[at]) | uint32(dev[at+1])<<8 | uint32(dev[at+2])<<16 | uint32(dev[at+3])<<24); got != want {
				return fmt.Errorf("tensor %d: scale %d is %g, want %g", i, j, got, want)
			}
		}
	}
	return nil
}

// TestTransferEncoded: an upload whose pieces are codes encoded on the
// way lands the codes and scales fp8.QuantizeE4M3 gives each head (NaN
// and infinite inputs among them), in both layouts, through rings large
// and small (slots reused), with the scales given or computed by the
// prologue (heads of one part and of several), whose items run late: a
// piece that does not wait for the heads it encodes (in BSHD, all heads
// of its batch entries), or scales copied before every item has run, show
// in the bytes (the mutants in TestHostPipeCatchesMutants).
func TestTransferEncoded(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 73))
	for _, tc := range []struct {
		name             string
		b, hq, hkv, s, d int
		l                backend.Layout
		ring             int
		scalesFirst      bool
	}{
		{"bhsd", 2, 4, 2, 300, 64, backend.BHSD, 1 << 20, false},
		{"bshd", 2, 6, 2, 130, 32, backend.BSHD, 1 << 20, false},
		{"one head", 1, 1, 1, 5, 8, backend.BHSD, 1 << 20, false},
		{"scales first", 2, 8, 4, 600, 64, backend.BHSD, 1 << 20, true},
		{"bhsd, slots reused", 1, 8, 8, 1024, 128, backend.BHSD, 3 * chunkBytes(1<<20), false},
		{"bshd, slots reused", 3, 8, 4, 512, 64, backend.BSHD, 2 * chunkBytes(1<<20), false},
	} {
		for _, computed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/computed=%v", tc.name, computed), func(t *testing.T) {
				u := newEncodedUpload(rng, tc.b, tc.hq, tc.hkv, tc.s, tc.d, tc.l, computed, tc.scalesFirst)
				var pro prologue
				if computed {
					pro = &slowPrologue{prologue: &u.set, rng: rand.New(rand.NewPCG(sd, 74))}
				}
				dev := make([]byte, u.size)
				e := newFakeEngine(dev, rand.New(rand.NewPCG(sd, 75)))
				defer e.close()
				if err := transferAfter(e, make([]byte, tc.ring), u.segs, u.size, true, pro); err != nil {
					t.Fatal(err)
				}
				e.drain()
				if err := u.check(dev); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestRoundTrip: a round trip queues every chunk of its upload before it
// runs between, the download's copies after what between queued (here a
// stand-in for the kernels that reads the uploaded codes and writes the
// region that comes down), and brings that region back whole; an error of
// between, or of a copy up, is the round trip's, nothing comes down after
// it, and nothing hangs.
func TestRoundTrip(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 76))
	for _, failUp := range []int{1, 3} {
		t.Run(fmt.Sprintf("copy %d up fails", failUp), func(t *testing.T) {
			u := newEncodedUpload(rng, 2, 8, 2, 700, 64, backend.BHSD, true, false)
			e := newFakeEngine(make([]byte, u.size), rand.New(rand.NewPCG(sd, 80)))
			defer e.close()
			e.fail = failUp
			ran := false
			flag := make([]byte, 4)
			segs := []hostSeg{{off: 0, host: flag}}
			pro := &slowPrologue{prologue: &u.set, rng: rand.New(rand.NewPCG(sd, 81))}
			err := roundTrip(e, make([]byte, 2*chunkBytes(u.size)), u.segs, u.size, pro, func() error { ran = true; return nil }, segs, 4)
			e.drain()
			if err == nil || ran {
				t.Fatalf("copy %d up failed: round trip %v, between ran %v", failUp, err, ran)
			}
		})
	}
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("between fails=%v", fail), func(t *testing.T) {
			u := newEncodedUpload(rng, 2, 8, 2, 700, 64, backend.BHSD, true, false)
			up := make([]byte, u.size)
			down := make([]byte, 4*len(u.wantCodes[0])+4)
			e := newFakeEngine(up, rand.New(rand.NewPCG(sd, 77)))
			defer e.close()
			ups := 0
			between := func() error {
				e.mu.Lock()
				ups = e.queued
				e.mu.Unlock()
				e.dev = down
				if fail {
					return errors.New("the launch failed")
				}
				return e.push(func() { // the kernels: each Q code, widened
					for i, c := range up[u.offs[0] : u.offs[0]+len(u.wantCodes[0])] {
						down[4+4*i], down[4+4*i+1] = c, ^c
					}
					down[0] = 1
				})
			}
			flag := make([]byte, 4)
			out := make([]byte, len(down)-4)
			segs := []hostSeg{{off: 0, host: flag}, {off: 4, host: out}}
			pro := &slowPrologue{prologue: &u.set, rng: rand.New(rand.NewPCG(sd, 78))}
			err := roundTrip(e, make([]byte, 2*chunkBytes(u.size)), u.segs, u.size, pro, between, segs, len(down))
			e.drain()
			if fail {
				if err == nil || !bytes.Equal(flag, make([]byte, 4)) {
					t.Fatalf("between failed: round trip %v, flag %v", err, flag)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, n, _, _ := pipePlan(u.size, 2*chunkBytes(u.size), encodeWeight); ups < n {
				t.Fatalf("between ran with %d copies queued, the upload has %d chunks", ups, n)
			}
			if err := u.check(up); err != nil {
				t.Fatal(err)
			}
			if flag[0] != 1 {
				t.Fatalf("the flag came down as %v", flag)
			}
			for i, c := range u.wantCodes[0] {
				if out[4*i] != c || out[4*i+1] != ^c {
					t.Fatalf("output bytes %d: %#x %#x, want %#x %#x", 4*i, out[4*i], out[4*i+1], c, ^c)
				}
			}
		})
	}
}

// TestRoundTripHalves: a float16 output on the way down (a halfDst
// segment between two plain ones, over several chunks) lands in its
// float32 slice as each value times the unit between set, every element
// once, with the bytes on either side where they belong.
func TestRoundTripHalves(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 82))
	u := newEncodedUpload(rng, 1, 2, 1, 300, 64, backend.BHSD, true, false)
	const n, tail = 300001, 12
	down := make([]byte, 4+2*n+2+tail) // flag, halves, padding to 4, tail
	for i := range down {
		down[i] = byte(rng.Uint32())
	}
	e := newFakeEngine(make([]byte, u.size), rand.New(rand.NewPCG(sd, 83)))
	defer e.close()
	dst := halfDst{out: make([]float32, n)}
	between := func() error {
		e.dev = down
		dst.factor, dst.unit = 8, 0.125
		return nil
	}
	flag, rest := make([]byte, 4), make([]byte, tail)
	segs := []hostSeg{{off: 0, host: flag}, {off: 4, dec: &dst}, {off: 4 + 2*n + 2, host: rest}}
	pro := &slowPrologue{prologue: &u.set, rng: rand.New(rand.NewPCG(sd, 84))}
	err := roundTrip(e, make([]byte, 2*chunkBytes(u.size)), u.segs, u.size, pro, between, segs, len(down))
	e.drain()
	if err != nil {
		t.Fatal(err)
	}
	if _, chunks, _, _ := pipePlan(len(down), 2*chunkBytes(u.size), 1); chunks < 2 {
		t.Fatalf("the download is %d chunk(s), want several", chunks)
	}
	if !bytes.Equal(flag, down[:4]) || !bytes.Equal(rest, down[len(down)-tail:]) {
		t.Fatalf("flag %v, tail %v: want %v, %v", flag, rest, down[:4], down[len(down)-tail:])
	}
	for i, x := range dst.out {
		h := uint16(down[4+2*i]) | uint16(down[5+2*i])<<8
		if w := half.ToFloat32(h) * dst.unit; math.Float32bits(x) != math.Float32bits(w) && !(x != x && w != w) {
			t.Fatalf("output %d: %g, want %g (float16 %#04x)", i, x, w, h)
		}
	}
}

// TestEncodeGroups: the scales a range of elements uses are those of every
// head an element of it lies in (in BSHD, every head of the batch entries
// it touches), and in BHSD no others; each element's scale (run) is its
// head's, and its run ends where the head's next element is not next to
// it.
func TestEncodeGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed.Get(), 79))
	for _, l := range []backend.Layout{backend.BHSD, backend.BSHD} {
		for range 200 {
			b, h, s, d := 1+rng.IntN(3), 1+rng.IntN(5), 1+rng.IntN(7), 1+rng.IntN(9)
			src := &encodeSrc{heads: h, seq: s, d: d, layout: l}
			n := b * h * s * d
			head := make([]int, n) // each element's (batch, head), brute force
			for g := range b * h {
				l.HeadRuns(g/h, g%h, h, s, d, func(o, m int) {
					for i := o; i < o+m; i++ {
						head[i] = g
					}
				})
			}
			e0 := rng.IntN(n)
			e1 := e0 + 1 + rng.IntN(n-e0)
			lo, hi := src.groups(e0, e1)
			touched := map[int]bool{}
			for i := e0; i < e1; i++ {
				touched[head[i]] = true
				if head[i] < lo || head[i] >= hi {
					t.Fatalf("%v b%d h%d s%d d%d: elements [%d, %d) use scales [%d, %d), element %d head %d", l, b, h, s, d, e0, e1, lo, hi, i, head[i])
				}
			}
			if l == backend.BHSD && hi-lo != len(touched) {
				t.Fatalf("%v b%d h%d s%d d%d: elements [%d, %d) use scales [%d, %d), %d heads", l, b, h, s, d, e0, e1, lo, hi, len(touched))
			}
			m, g := src.run(e0)
			if g != head[e0] || m < 1 || e0+m > n || head[e0+m-1] != g || e0+m < n && head[e0+m] == g && (l == backend.BHSD || (e0+m)%d != 0) {
				t.Fatalf("%v b%d h%d s%d d%d: element %d runs %d with scale %d, its head is %d", l, b, h, s, d, e0, m, g, head[e0])
			}
		}
	}
}

// TestPlanPrologue: a chunk's pieces wait for the prologue items of every
// head whose codes lie in it, and for all items where it holds bytes the
// prologue writes; the work holds every item and every piece once, each
// piece after the items it waits for (so no piece waits on an item no one
// has taken).
func TestPlanPrologue(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed.Get(), 84))
	for _, l := range []backend.Layout{backend.BHSD, backend.BSHD} {
		for _, first := range []bool{false, true} {
			u := newEncodedUpload(rng, 2, 8, 4, 333, 64, l, true, first)
			var p pipe
			if _, err := p.plan(newFakeEngine(nil, rng), make([]byte, 1<<20), u.segs, u.size, true, &u.set, 0); err != nil {
				t.Fatal(err)
			}
			for c := range p.n {
				lo, hi := p.span(c)
				for _, s := range u.segs {
					x, y := max(lo, s.off), min(hi, s.off+s.size())
					if x >= y {
						continue
					}
					a, b := 0, p.proN
					if s.enc != nil {
						a, b = s.enc.items(x-s.off, y-s.off)
					} else if !s.after {
						continue
					}
					if p.need[c][0] > a || p.need[c][1] < b || p.proOK[c].Load() {
						t.Fatalf("%v: chunk %d waits for items %v, its bytes [%d, %d) need [%d, %d)", l, c, p.need[c], x, y, a, b)
					}
				}
			}
			items, pieces := map[int]int{}, map[int]bool{}
			firstPiece := map[int]int{} // each chunk's first piece's task
			for i := range int64(p.proN + p.n*p.pieces) {
				item, k := p.task(i)
				switch {
				case item >= 0:
					items[item] = int(i)
				default:
					pieces[k] = true
					if _, ok := firstPiece[k/p.pieces]; !ok {
						firstPiece[k/p.pieces] = int(i)
					}
					for j := p.need[k/p.pieces][0]; j < p.need[k/p.pieces][1]; j++ {
						if at, ok := items[j]; !ok || at > int(i) {
							t.Fatalf("%v: piece %d (task %d) waits for item %d, not taken before it", l, k, i, j)
						}
					}
				}
			}
			if len(items) != p.proN || len(pieces) != p.n*p.pieces {
				t.Fatalf("%v: the work holds %d of %d items, %d of %d pieces", l, len(items), p.proN, len(pieces), p.n*p.pieces)
			}
			// The items the next chunk waits for come before a chunk's
			// pieces (itemLookahead), so that its pieces find them done.
			for c := range p.n - 1 {
				for j := p.need[c+1][0]; j < p.need[c+1][1]; j++ {
					if items[j] > firstPiece[c] {
						t.Fatalf("%v: chunk %d's item %d is task %d, after chunk %d's first piece (task %d)", l, c+1, j, items[j], c, firstPiece[c])
					}
				}
			}
		}
	}
}

// countingPrologue counts the items run, each once.
type countingPrologue struct {
	n   int
	ran []atomic.Int32
}

func (c *countingPrologue) items() int { return c.n }
func (c *countingPrologue) item(i int) { c.ran[i].Add(1) }

// TestPrologueRuns: an upload returns only once every item of its
// prologue has run once, those no piece waits for too, with helpers and
// without (a region too small for them).
func TestPrologueRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed.Get(), 85))
	for _, size := range []int{100, 5 << 20} {
		host := make([]byte, size)
		c := &countingPrologue{n: 7, ran: make([]atomic.Int32, 7)}
		e := newFakeEngine(make([]byte, size), rng)
		if err := transferAfter(e, make([]byte, 2<<20), []hostSeg{{off: 0, host: host}}, size, true, c); err != nil {
			t.Fatal(err)
		}
		e.drain()
		e.close()
		for i := range c.ran {
			if n := c.ran[i].Load(); n != 1 {
				t.Errorf("a region of %d bytes: item %d ran %d times", size, i, n)
			}
		}
	}
}
