package cuda

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// bytesOf views a slice of plain numbers as its bytes.
func bytesOf[T ~uint8 | ~float32 | ~int32](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0])))
}

// encodeSrc is a piece of an upload that is not copied but encoded on the
// way: the E4M3 codes of the float32 tensor x ([batch][heads][seq][d] in
// layout), each (batch, head)'s elements with its own scale (scales[b·heads
// + head]), a code a byte: byte i of the piece is fp8.ToE4M3(x[i]/scale,
// fp8.NoSat), what fp8.EncodeE4M3 writes, and so what the device's codes of
// fp8.QuantizeE4M3 would be. Any byte range of it may be encoded on its own.
type encodeSrc struct {
	x      []float32
	scales []float32
	heads  int
	seq, d int
	layout backend.Layout
	// item0 is the first prologue item of scales[0] (each head's parts
	// items follow in order, head after head), or -1 where the scales are
	// given; encodeSet.plan sets it, parts, rows and acc.
	item0       int
	parts, rows int       // a head's items, and the rows each reads
	acc         []headAcc // each head's amax as its parts merge it
}

// headAcc is one head's amax as the prologue's items merge their parts'
// (the bits of a non-negative float32, whose order is the uint32's), and
// the parts still to merge.
type headAcc struct {
	amax atomic.Uint32
	left atomic.Int32
}

// partElems bounds the elements a prologue item reads: a head's amax is
// split into parts of whole rows, so that the items of the heads a chunk
// needs run on several goroutines at once.
const partElems = 1 << 14

// items returns the prologue items [lo, hi) that elements [e0, e1) wait
// for: all parts of the heads whose scales they use.
func (s *encodeSrc) items(e0, e1 int) (lo, hi int) {
	a, b := s.groups(e0, e1)
	return s.item0 + a*s.parts, s.item0 + b*s.parts
}

// groups returns the scales [lo, hi) that elements [e0, e1) use (e0 <
// e1): those of the heads they lie in, in BSHD all heads of the batch
// entries they lie in.
func (s *encodeSrc) groups(e0, e1 int) (lo, hi int) {
	if s.layout == backend.BSHD {
		entry := s.seq * s.heads * s.d
		return e0 / entry * s.heads, ((e1-1)/entry + 1) * s.heads
	}
	block := s.seq * s.d
	return e0 / block, (e1-1)/block + 1
}

// run is how many elements in a row share a scale from element e on (a
// head's whole block in BHSD, a row of d in BSHD), and that scale's index.
func (s *encodeSrc) run(e int) (n, g int) {
	if s.layout == backend.BSHD {
		row := e / s.d // (b·seq + i)·heads + head
		b := row / (s.seq * s.heads)
		return s.d - e%s.d, b*s.heads + row%s.heads
	}
	block := s.seq * s.d
	return block - e%block, e / block
}

// encode writes the codes of elements [e, e+len(dst)) into dst.
func (s *encodeSrc) encode(dst []byte, e int) {
	for len(dst) > 0 {
		n, g := s.run(e)
		n = min(n, len(dst))
		codes := unsafe.Slice((*fp8.E4M3)(unsafe.Pointer(&dst[0])), n)
		fp8.EncodeE4M3(codes, s.x[e:e+n], s.scales[g], fp8.NoSat)
		dst, e = dst[n:], e+n
	}
}

// encodeSet is an upload's encoded tensors (a call's Q, K and V) and,
// where their scales are the backend's to compute, the prologue that
// computes them: the parts of each (batch, head) of the first tensor,
// then of the second, then of the third, as their codes lie in the region.
type encodeSet [3]encodeSrc

// plan readies the set's prologue: each tensor's parts and rows a part,
// its first item, and its heads' accumulators from acc (grown as needed;
// returned for reuse), cleared.
func (t *encodeSet) plan(acc []headAcc) []headAcc {
	heads := len(t[0].scales) + len(t[1].scales) + len(t[2].scales)
	acc = freelist.Grow(acc, heads)
	item, h := 0, 0
	for i := range t {
		s := &t[i]
		s.rows = max(1, partElems/max(s.d, 1))
		s.parts = max(1, (s.seq+s.rows-1)/s.rows)
		s.item0, s.acc = item, acc[h:h+len(s.scales)]
		for g := range s.acc {
			s.acc[g].amax.Store(0)
			s.acc[g].left.Store(int32(s.parts))
		}
		item += len(s.scales) * s.parts
		h += len(s.scales)
	}
	return acc
}

func (t *encodeSet) items() int {
	n := 0
	for i := range t {
		n += len(t[i].scales) * t[i].parts
	}
	return n
}

// item merges one part of a head into its amax; the head's last part
// writes its scale as fp8.QuantizeE4M3 computes it: fp8.ScaleForAmax of
// the largest finite magnitude.
func (t *encodeSet) item(i int) {
	s := &t[0]
	for k := range t {
		if s = &t[k]; i < len(s.scales)*s.parts {
			break
		}
		i -= len(s.scales) * s.parts
	}
	g, j := i/s.parts, i%s.parts
	b, h := g/s.heads, g%s.heads
	r0, r1 := j*s.rows, min(s.seq, (j+1)*s.rows)
	var m float32
	s.layout.RowRuns(b, h, s.heads, s.seq, s.d, r0, r1, func(o, n int) { m = max(m, fp8.Amax(s.x[o:o+n])) })
	acc := &s.acc[g]
	for {
		old := acc.amax.Load()
		if math.Float32frombits(old) >= m || acc.amax.CompareAndSwap(old, math.Float32bits(m)) {
			break
		}
	}
	if acc.left.Add(-1) == 0 {
		s.scales[g] = fp8.ScaleForAmax(math.Float32frombits(acc.amax.Load()))
	}
}
