package cuda

import (
	"runtime"
	"sync/atomic"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/internal/par"
)

// copyChunk is the piece of a host copy one goroutine takes at a time.
const copyChunk = 128 << 10

// parallelCopy copies src[i] into dst[i] for every i, spreading chunks of
// the larger ones over up to 8 goroutines of par.Default (whose helpers are
// still polling between the phases of back-to-back calls): one goroutine's
// memmove runs at about 15 GB/s, below the bus it feeds.
func parallelCopy(dst, src [][]byte) {
	total := 0
	for _, s := range src {
		total += len(s)
	}
	workers := min(8, runtime.GOMAXPROCS(0), (total+copyChunk-1)/copyChunk)
	if workers <= 1 {
		for i := range src {
			copy(dst[i], src[i])
		}
		return
	}
	var j copyJob
	for i := range src {
		for off := 0; off < len(src[i]); off += copyChunk {
			end := min(off+copyChunk, len(src[i]))
			j.pieces = append(j.pieces, piece{dst[i][off:end], src[i][off:end]})
		}
	}
	par.Default.Run(workers-1, &j)
}

type piece struct{ d, s []byte }

// copyJob copies its pieces, each goroutine taking the next in turn.
type copyJob struct {
	pieces []piece
	next   atomic.Int64
}

func (j *copyJob) Work(int) {
	for i := j.next.Add(1) - 1; i < int64(len(j.pieces)); i = j.next.Add(1) - 1 {
		copy(j.pieces[i].d, j.pieces[i].s)
	}
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
	var groups []func()
	for _, t := range ts {
		for bh := range batch * t.heads {
			b, h := bh/t.heads, bh%t.heads
			s := t.scales[bh]
			groups = append(groups, func() {
				if l == backend.BHSD {
					n := t.seq * d
					fp8.EncodeE4M3(t.codes[bh*n:(bh+1)*n], t.x[bh*n:(bh+1)*n], s, fp8.NoSat)
					return
				}
				for i := range t.seq {
					o := l.Offset(b, h, i, t.heads, t.seq, d)
					fp8.EncodeE4M3(t.codes[o:o+d], t.x[o:o+d], s, fp8.NoSat)
				}
			})
		}
	}
	total := 0
	for _, t := range ts {
		total += len(t.x)
	}
	par.Default.For(len(groups), total/(1<<16), func(i int) { groups[i]() })
}
