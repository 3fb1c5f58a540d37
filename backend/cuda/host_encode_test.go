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
		u.set = append(u.set, encodeSrc{x: layout.Permute(x, b, h, s, d, l), scales: given, heads: h, seq: s, d: d, layout: l, item0: -1})
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
		seg := hostSeg{off: off, host: bytesOf(u.set[i].scales)}
		if src := &u.set[i]; computed { // the items of its tensor's heads
			seg.after = [2]int{src.item0, src.item0 + len(src.scales)*src.parts}
		}
		u.segs = append(u.segs, seg)
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

// fakeKernels stand in for a round trip's kernels on a fakeEngine: group
// g, queued on the up lane, reads the upload's bytes [ends[g-1],
// ends[g]) and writes its part of the download: a flag (g+1), then each
// byte it read, inverted.
type fakeKernels struct {
	e        *fakeEngine
	up, down []byte // the device's regions
	ends     []int
	part     int   // bytes of a group's part of the download
	fail     int   // > 0: group fail-1's launch fails
	at       []int // the copies up queued when each group was launched
}

func (k *fakeKernels) groups() int     { return len(k.ends) }
func (k *fakeKernels) upEnd(g int) int { return k.ends[g] }

func (k *fakeKernels) launch(g int) error {
	if g == k.fail-1 {
		return errors.New("the launch failed")
	}
	k.e.mu.Lock()
	k.at = append(k.at, k.e.ups)
	k.e.mu.Unlock()
	return k.e.push(func() {
		lo, hi := k.span(g)
		part := k.down[g*k.part:]
		part[0] = byte(g + 1)
		for i, c := range k.up[lo:hi] {
			part[4+i] = ^c
		}
	})
}

// span is the upload's bytes group g reads.
func (k *fakeKernels) span(g int) (lo, hi int) {
	if g > 0 {
		lo = k.ends[g-1]
	}
	return lo, k.ends[g]
}

// TestRoundTrip: a round trip launches each group of kernels once the
// upload's chunks it reads are queued, and, with several groups, the
// first before the upload's last chunk is (the download of a group
// overlaps the upload of the next); each group's part of the download
// comes down behind its kernels (a fence between the lanes) and whole.
// An error of a launch, or of a copy up, is the round trip's, nothing
// comes down after it, and nothing hangs.
func TestRoundTrip(t *testing.T) {
	sd := seed.Get()
	t.Logf("seed %d (%s reproduces)", sd, seed.Env)
	rng := rand.New(rand.NewPCG(sd, 76))
	for _, tc := range []struct {
		name               string
		groups             int
		failUp, failLaunch int
	}{
		{"one group", 1, 0, 0},
		{"three groups", 3, 0, 0},
		{"five groups", 5, 0, 0},
		{"copy 1 up fails", 3, 1, 0},
		{"copy 3 up fails", 1, 3, 0},
		{"launch fails", 1, 0, 1},
		{"second launch fails", 3, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newEncodedUpload(rng, 2, 8, 2, 700, 64, backend.BHSD, true, false)
			up := make([]byte, u.size)
			e := newFakeEngine(up, rand.New(rand.NewPCG(sd, 77)))
			defer e.close()
			e.fail = tc.failUp
			k := &fakeKernels{e: e, up: up, fail: tc.failLaunch}
			for g := range tc.groups {
				k.ends = append(k.ends, (g+1)*u.size/tc.groups)
			}
			widest := 0
			for g := range tc.groups {
				lo, hi := k.span(g)
				widest = max(widest, hi-lo)
			}
			k.part = 4 + widest
			chunk, chunks, _, _ := pipePlan(u.size, 1<<40, encodeWeight)
			ring := make([]byte, 2*chunkBytes(u.size))
			if tc.groups > 1 {
				k.part = (k.part + pipeAlign - 1) / pipeAlign * pipeAlign
				ring = make([]byte, chunk*chunks+tc.groups*k.part)
			}
			k.down = make([]byte, tc.groups*k.part)
			e.down = k.down
			outs := make([][]byte, tc.groups)
			var segs []hostSeg
			for g := range outs {
				lo, hi := k.span(g)
				outs[g] = make([]byte, 4+hi-lo)
				segs = append(segs, hostSeg{off: g * k.part, host: outs[g]})
			}
			pro := &slowPrologue{prologue: &u.set, rng: rand.New(rand.NewPCG(sd, 78))}
			err := roundTrip(e, ring, u.segs, u.size, pro, k, segs, len(k.down))
			e.drain()
			if tc.failUp > 0 || tc.failLaunch > 0 {
				if err == nil {
					t.Fatal("the round trip did not fail")
				}
				for g := range outs {
					if !bytes.Equal(outs[g], make([]byte, len(outs[g]))) {
						t.Fatalf("group %d's part came down after the error", g)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := u.check(up); err != nil {
				t.Fatal(err)
			}
			for g, at := range k.at {
				if need := (k.ends[g] + chunk - 1) / chunk; at < need {
					t.Fatalf("group %d launched with %d chunks queued, it reads %d", g, at, need)
				}
			}
			if tc.groups > 1 && k.at[0] >= chunks {
				t.Fatalf("group 0 (bytes to %d, chunks of %d) launched once all %d chunks were queued", k.ends[0], chunk, chunks)
			}
			for g := range outs {
				lo, _ := k.span(g)
				if outs[g][0] != byte(g+1) {
					t.Fatalf("group %d's flag came down as %d", g, outs[g][0])
				}
				for i, c := range outs[g][4:] {
					if c != ^up[lo+i] {
						t.Fatalf("group %d: byte %d came down as %#x, want %#x", g, i, c, ^up[lo+i])
					}
				}
			}
		})
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
					a, b := s.after[0], s.after[1]
					if s.enc != nil {
						a, b = s.enc.items(x-s.off, y-s.off)
					} else if b <= a {
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
