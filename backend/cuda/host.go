//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/half"
	"github.com/fp8attn/fp8attn/internal/poison"
)

// A call on float32 host slices with FP8 precision
// (backend.Problem.QuantizeOnRead) goes to the device as E4M3 codes: the
// goroutines of one fork-join (roundTrip) compute each (batch, head)'s
// scale from its amax (ScalesOnRead; or take the caller's), encode the
// float32 inputs straight into the page-locked ring, a chunk at a time,
// while the bus copies the chunks before; the calling goroutine queues the
// copies, then the attention and fp8attn_out_half, then the copies of the
// output (and LSE) back, which the helpers move out of the ring as they
// land. One byte a code goes over the bus instead of four, and the host
// reads each input once for its amax and once for its codes. The output
// comes down in float16, two bytes instead of four: the kernel rounds each
// float32 output times a power of two (half.Scale, from V's scales) to
// float16, and the helpers multiply it back as they move it out (exact),
// so the caller's output is its float32 one rounded to 11 significant
// bits (docs/ACCURACY.md: under a hundredth of the FP8 tier). The device
// side of the call is one block, kept with its resident for the next call
// of the same key (hostCall):
//
//	Q, K, V codes | Q, K, V scales | flag | out16 | LSE | out
//
// The codes, the scales and the score-factor flag (a zero word, so that no
// memset clears it) go up as one region; the flag, the float16 output and
// the LSE come down as one.

// ScalesOnRead implements backend.OnReadScaler: the backend computes the
// scales of p's float32 inputs itself (on the host, beside their
// encoding), for every problem whose sizes it takes.
func (b *kernelBackend) ScalesOnRead(p *backend.Problem) bool {
	_, _, err := problemShape(p)
	return err == nil
}

// hostLayout is where a host-slice call's pieces lie in its device block
// (byte offsets, each aligned to stagingAlign).
type hostLayout struct {
	q, k, v, flag, out16, lse, out int    // the codes, the flag, the outputs (float16 and float32)
	scales                         [3]int // Q, K, V scales
	up, down                       int    // the region sizes: [0, up) goes up, [flag, flag+down) comes down
	total                          int
}

// newHostLayout lays out a call of p's shape with nq and nkv elements in
// Q and in K (or V).
func newHostLayout(p *backend.Problem, nq, nkv int) hostLayout {
	var l hostLayout
	off := 0
	at := func(n int) int {
		o := off
		off += alignUp(n)
		return o
	}
	l.q, l.k, l.v = at(nq), at(nkv), at(nkv)
	l.scales = [3]int{at(4 * p.B * p.Hq), at(4 * p.B * p.Hkv), at(4 * p.B * p.Hkv)}
	l.flag = at(4)
	l.up = l.flag + 4
	l.out16 = at(2 * nq)
	end := l.out16 + 2*nq
	if p.LSE != nil {
		l.lse = at(4 * p.B * p.Hq * p.Sq)
		end = l.lse + 4*p.B*p.Hq*p.Sq
	}
	l.down = end - l.flag
	l.out = at(4 * nq)
	l.total = off
	return l
}

// zeroWord is the flag's bytes on the way up.
var zeroWord [4]byte

// hostAttention computes p (validated, QuantizeOnRead) on stage st of d.
func (b *kernelBackend) hostAttention(d *device, st int, p *backend.Problem) (err error) {
	if d.capturing() != nil {
		return errCapture("copying host memory to the device")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	key, keep := newHostKey(p, st)
	var flag [1]int32
	err = d.do(func() error {
		c := d.takeHostCall(key, keep)
		if c == nil {
			var err error
			if c, err = d.newHostCall(p, key); err != nil {
				return err
			}
		}
		if err := b.hostRoundTrip(d, st, p, c, flag[:]); err != nil {
			return errors.Join(err, c.r.release())
		}
		if !keep {
			return c.r.release()
		}
		d.putHostCall(c)
		return nil
	})
	if err != nil {
		return err
	}
	return factorError(flag[0], p.Hq)
}

// hostRoundTrip runs a host-slice call on c: its codes and scales up
// through the ring, the kernels, and its output, LSE and score-factor
// flag (into flag) down. The caller is inside do.
func (b *kernelBackend) hostRoundTrip(d *device, st int, p *backend.Problem, c *hostCall, flag []int32) error {
	l, r := c.l, c.r
	e, err := d.newStreamEngine(l, c.blk.p)
	if err != nil {
		return err
	}
	defer e.close()
	var eng hostEngine = e
	if b.hostEngine != nil {
		eng = b.hostEngine(e)
	}
	ph, _ := eng.(phaser)
	if ph != nil {
		ph.phase("trip")
	}
	var pro prologue
	if p.ScalesOnRead {
		pro = &e.enc
	}
	between := func() error {
		if b.poison {
			if err := cu.MemsetD32Async(cu.DevicePtr(r.params.Out), poison.Bits, r.outN, d.stream); err != nil {
				return err
			}
			if err := cu.MemsetD32Async(c.blk.p+cu.DevicePtr(l.out16), poison.HalfPair, r.outN/2, d.stream); err != nil {
				return err
			}
			if len(p.LSE) > 0 {
				if err := cu.MemsetD32Async(cu.DevicePtr(r.params.LSE), poison.Bits, int64(len(p.LSE)), d.stream); err != nil {
					return err
				}
			}
		}
		if ph != nil {
			ph.phase("launch")
		}
		if err := r.launch(st); err != nil {
			return err
		}
		e.out16.factor, e.out16.unit = half.Scale(e.vScales)
		if err := d.outHalf(r.params.Out, uint64(c.blk.p)+uint64(l.out16), r.outN, e.out16.factor); err != nil {
			return err
		}
		if ph != nil {
			ph.phase("launched")
		}
		e.base = c.blk.p + cu.DevicePtr(l.flag)
		return nil
	}
	up, down := e.upSegs(p, l), e.downSegs(p, l, flag)
	if ph != nil {
		ph.phase("segs")
	}
	if err := e.run(roundTrip(eng, e.ring, up, l.up, pro, between, down, l.down)); err != nil {
		return fmt.Errorf("cuda: a call on host slices: %w", err)
	}
	if ph != nil {
		ph.phase("returned")
	}
	return nil
}

// hostCall is the device side of a host-slice call: its block (laid out
// by l) and the resident that reads and writes it. The device keeps the
// last one (putHostCall), so that the next call of the same key finds its
// memory, its parameters and its tensor maps made.
type hostCall struct {
	key   hostKey
	l     hostLayout
	blk   pooled
	r     *resident
	views [8]buffer // the block's pieces, for the resident
}

// hostKey is what a hostCall's block and resident depend on.
type hostKey struct {
	shape  backend.Shape
	layout backend.Layout
	mask   backend.Mask
	scale  float32
	lse    bool
	stage  int
}

// newHostKey returns p's key, and whether its call may be kept (one with
// attention variants is not: its sinks are the call's).
func newHostKey(p *backend.Problem, st int) (hostKey, bool) {
	return hostKey{p.Shape, p.Layout, p.Mask, p.Scale, p.LSE != nil, st}, !p.Variants.Any()
}

// takeHostCall hands over the kept call if keep and its key is key, and
// nil otherwise. The caller is inside do.
func (d *device) takeHostCall(key hostKey, keep bool) *hostCall {
	c := d.hostCall
	if c == nil || !keep || c.key != key {
		return nil
	}
	d.hostCall = nil
	return c
}

// putHostCall keeps c for the next call, giving the memory of the one
// kept before back to the pool. The caller is inside do.
func (d *device) putHostCall(c *hostCall) {
	d.dropHostCall()
	d.hostCall = c
}

// dropHostCall gives the kept call's memory, if any, back to the pool at
// once: its work has completed (its download waited for it) and nothing
// else uses it, so no event need pass first (where a trim frees it right
// after). The caller is inside do.
func (d *device) dropHostCall() {
	if c := d.hostCall; c != nil {
		d.hostCall = nil
		for _, b := range c.r.bufs {
			d.pool[b.size] = append(d.pool[b.size], b.p)
		}
		c.r.bufs = nil
	}
}

// newHostCall reserves the block of p's call and makes its resident. The
// caller is inside do.
func (d *device) newHostCall(p *backend.Problem, key hostKey) (*hostCall, error) {
	nq64, nkv64, err := problemShape(p)
	if err != nil {
		return nil, err
	}
	s := p.Shape
	nq, nkv := int(nq64), int(nkv64)
	c := &hostCall{key: key, l: newHostLayout(p, nq, nkv)}
	l := c.l
	ptr, size, err := d.alloc(int64(l.total))
	if err != nil {
		return nil, err
	}
	c.blk = pooled{ptr, size}
	used := 0
	sub := func(off, n int) *buffer {
		b := &c.views[used]
		used++
		*b = buffer{dev: d, buf: pooled{c.blk.p + cu.DevicePtr(off), int64(n)}, n: int64(n)}
		return b
	}
	in := [6]*buffer{sub(l.q, nq), sub(l.k, nkv), sub(l.v, nkv),
		sub(l.scales[0], 4*s.B*s.Hq), sub(l.scales[1], 4*s.B*s.Hkv), sub(l.scales[2], 4*s.B*s.Hkv)}
	out := sub(l.out, 4*nq)
	out.flag = pooled{c.blk.p + cu.DevicePtr(l.flag), 4}
	var lse *buffer
	if p.LSE != nil {
		lse = sub(l.lse, 4*s.B*s.Hq*s.Sq)
	}
	r, err := d.residentFor(p, in, out, lse)
	if err != nil {
		return nil, errors.Join(err, d.release([]pooled{c.blk}))
	}
	r.bufs = append(r.bufs, c.blk) // released with the resident's own
	if err := r.setUp(in, out, lse); err != nil {
		return nil, errors.Join(err, r.release())
	}
	c.r = r
	return c, nil
}

var _ backend.OnReadScaler = (*kernelBackend)(nil)

// outHalf queues fp8attn_out_half on the device's stream: the n float32
// at x times factor (a power of two), rounded to float16 at y. The caller
// is inside do.
func (d *device) outHalf(x, y uint64, n int64, factor float32) error {
	hp := halfParams{X: x, Y: y, N: n, Factor: factor}
	const threads = 256
	blocks := min(max((n/4+threads-1)/threads, 1), 1<<16-1)
	return launchStruct(d.quant.outHalf, int(blocks), 1, 1, threads, 0, d.stream, unsafe.Pointer(&hp))
}
