package cuda

import (
	"runtime"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/ntcopy"
	"github.com/fp8attn/fp8attn/internal/par"
)

// copyChunk is the piece of a host copy one goroutine takes at a time.
const copyChunk = 128 << 10

// parallelCopy copies src[i] into dst[i] for every i, spreading chunks of
// the larger ones over up to 8 goroutines of par.Default (whose helpers are
// still polling between the phases of back-to-back calls): one goroutine's
// memmove runs at about 15 GB/s, below the bus it feeds.
func parallelCopy(dst, src [][]byte) { parallelMove(dst, src, false) }

// parallelMove is parallelCopy, with non-temporal stores (ntcopy) where
// streamed: for page-locked memory the bus reads next.
func parallelMove(dst, src [][]byte, streamed bool) {
	move := func(d, s []byte) {
		if streamed {
			ntcopy.Copy(d, s)
		} else {
			copy(d, s)
		}
	}
	total := 0
	for _, s := range src {
		total += len(s)
	}
	workers := min(8, runtime.GOMAXPROCS(0), (total+copyChunk-1)/copyChunk)
	if workers <= 1 {
		for i := range src {
			move(dst[i], src[i])
		}
		return
	}
	type piece struct{ d, s []byte }
	var pieces []piece
	for i := range src {
		for off := 0; off < len(src[i]); off += copyChunk {
			end := min(off+copyChunk, len(src[i]))
			pieces = append(pieces, piece{dst[i][off:end], src[i][off:end]})
		}
	}
	par.Default.For(len(pieces), workers-1, func(i int) { move(pieces[i].d, pieces[i].s) })
}

// encodeTensor is one float32 input to encode on read: x (heads heads of
// seq rows of D in the problem's layout) into codes, each (batch, head)
// with its dequantization scale.
type encodeTensor struct {
	codes  []fp8.E4M3
	x      []float32
	scales []float32
	heads  int
	seq    int
}

// encodeOnRead writes every tensor's E4M3 codes (fp8.EncodeE4M3, NoSat:
// the codes fp8.QuantizeE4M3 gives with those scales), in the layout of its
// input, spreading the (tensor, batch, head) groups over par.Default.
func encodeOnRead(ts []encodeTensor, batch, d int, l backend.Layout) {
	groups, total := 0, 0
	for _, t := range ts {
		groups += batch * t.heads
		total += len(t.x)
	}
	par.Default.For(groups, total/(1<<16), func(g int) {
		t := ts[0]
		for _, t = range ts { // the tensor of group g, and g within it
			if g < batch*t.heads {
				break
			}
			g -= batch * t.heads
		}
		s := t.scales[g]
		l.HeadRuns(g/t.heads, g%t.heads, t.heads, t.seq, d, func(o, n int) {
			fp8.EncodeE4M3(t.codes[o:o+n], t.x[o:o+n], s, fp8.NoSat)
		})
	})
}
