//go:build cuda

package cuda

import (
	"errors"
	"fmt"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/poison"
)

// A call on float32 host slices with FP8 precision
// (backend.Problem.QuantizeOnRead) goes to the device as E4M3 codes: the
// goroutines of one fork-join (roundTrip) compute each (batch, head)'s
// scale from its amax (ScalesOnRead; or take the caller's), encode the
// float32 inputs straight into the page-locked ring, a chunk at a time,
// while the bus copies the chunks before; the calling goroutine queues the
// copies, the attention and the copies of the output (and LSE) back,
// which the helpers move out of the ring as they land. One byte a code
// goes over the bus instead of four, and the host reads each input once
// for its amax and once for its codes.
//
// Where the whole round trip fits in the ring, the call's heads go in
// groups (hostGroupsFor): each group's inputs lie together in the region
// that goes up, and its own resident attends to them as soon as they are
// queued, while the next group's are encoded; its output comes down on a
// second stream while the next groups' inputs go up, so that only the
// last group's attention and output follow the last input chunk. The
// device side of the call is one block, kept with its residents for the
// next call of the same key (hostCall):
//
//	group 0's Q, K, V codes and scales | group 1's ... | group 0's flag, out, LSE | group 1's ...
//
// The codes and the scales go up as one region, each group's flag (the
// score-factor flag, cleared when the block is made and written only by
// a failing call, which is not kept), output and LSE come down as one.

// ScalesOnRead implements backend.OnReadScaler: the backend computes the
// scales of p's float32 inputs itself (on the host, beside their
// encoding), for every problem whose sizes it takes.
func (b *kernelBackend) ScalesOnRead(p *backend.Problem) bool {
	_, _, err := problemShape(p)
	return err == nil
}

// hostGroups bounds the groups of heads of a host-slice call; a variable
// so that the benchmarks can set it.
var hostGroups = 4

// hostGroupsFor returns how many groups p's heads go in, and the query
// heads of one group's unit: a (batch, KV head) with its query heads in
// BHSD, a batch in BSHD, whose inputs and outputs lie together in every
// tensor. The groups are the largest count of equal runs of units up to
// hostGroups; one for a call with attention variants (whose sinks are
// the call's), or whose round trip the ring cannot hold whole
// (newHostLayout).
func hostGroupsFor(p *backend.Problem) (groups, unitHeads int) {
	units, unitHeads := p.B*p.Hkv, p.Hq/max(p.Hkv, 1)
	if p.Layout == backend.BSHD {
		units, unitHeads = p.B, p.Hq
	}
	if p.Variants.Any() {
		return 1, unitHeads
	}
	for g := min(hostGroups, units); g > 1; g-- {
		if units%g == 0 {
			return g, unitHeads
		}
	}
	return 1, unitHeads
}

// hostLayout is where a host-slice call's pieces lie in its device block
// (byte offsets, each aligned to stagingAlign), group by group.
type hostLayout struct {
	groups []hostGroup
	shape  backend.Shape // a group's problem
	heads  int           // the (batch, query head) pairs a group holds
	up     int           // the up region: [0, up)
	down0  int           // the down region: [down0, down0+down), a part a group
	down   int
	part   int // a group's bytes of the down region
	ring   int // the page-locked ring the round trip takes
	total  int
}

// hostGroup is where one group's pieces lie in the block.
type hostGroup struct {
	q, k, v   int    // codes
	scales    [3]int // Q, K, V scales
	upEnd     int    // the end of its bytes in the up region
	flag, out int    // its part of the down region
	lse       int    // (where the call has an LSE)
}

// newHostLayout lays out a call of p's shape.
func newHostLayout(p *backend.Problem) hostLayout {
	g, unitHeads := hostGroupsFor(p)
	l := layoutGroups(p, g, unitHeads)
	if g > 1 && l.ring > pipeRingMax {
		l = layoutGroups(p, 1, unitHeads)
	}
	return l
}

// layoutGroups lays out a call of p's shape in g groups of units of
// unitHeads query heads.
func layoutGroups(p *backend.Problem, g, unitHeads int) hostLayout {
	s := p.Shape
	l := hostLayout{groups: make([]hostGroup, g), shape: s, heads: s.B * s.Hq / g}
	switch per := s.B * s.Hkv / g; {
	case p.Layout == backend.BSHD:
		l.shape.B = s.B / g
	default: // each (batch, KV head) a batch of its query heads
		l.shape.B, l.shape.Hq, l.shape.Hkv = per, unitHeads, 1
	}
	hkv := l.shape.B * l.shape.Hkv
	nq, nkv := l.heads*s.Sq*s.D, hkv*s.Sk*s.D
	off := 0
	at := func(n int) int {
		o := off
		off += alignUp(n)
		return o
	}
	for i := range l.groups {
		x := &l.groups[i]
		x.q, x.k, x.v = at(nq), at(nkv), at(nkv)
		x.scales = [3]int{at(4 * l.heads), at(4 * hkv), at(4 * hkv)}
		x.upEnd = x.scales[2] + 4*hkv
	}
	l.up = l.groups[g-1].upEnd
	l.down0 = off
	out := alignUp(4) // a part: flag | out | LSE
	lse, n := out+alignUp(4*nq), out+4*nq
	if p.LSE != nil {
		n = lse + 4*l.heads*s.Sq
	}
	l.part = n
	if g > 1 { // whole pages, so that each part is a chunk of its own
		l.part = (n + pipeAlign - 1) / pipeAlign * pipeAlign
	}
	for i := range l.groups {
		x := &l.groups[i]
		x.flag = l.down0 + i*l.part
		x.out, x.lse = x.flag+out, x.flag+lse
	}
	l.down = g * l.part
	l.total = l.down0 + alignUp(l.down)
	if g > 1 {
		chunk, chunks, _, _ := pipePlan(l.up, 1<<40, encodeWeight) // (a ring past the region: a slot a chunk)
		l.ring = chunk*chunks + l.down
	} else {
		l.ring = min(max(l.up, l.down), pipeRingMax)
	}
	return l
}

// hostAttention computes p (validated, QuantizeOnRead) on stage st of d.
func (b *kernelBackend) hostAttention(d *device, st int, p *backend.Problem) (err error) {
	if d.capturing() != nil {
		return errCapture("copying host memory to the device")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	key, keep := newHostKey(p, st)
	var flag int32
	err = d.do(func() error {
		c := d.takeHostCall(key, keep)
		if c == nil {
			var err error
			if c, err = d.newHostCall(p, key); err != nil {
				return err
			}
		}
		if err := b.hostRoundTrip(d, st, p, c); err != nil {
			return errors.Join(err, c.release())
		}
		if flag = c.flag(); !keep || flag != 0 { // (a flag set stays set: the block is not kept)
			return c.release()
		}
		d.putHostCall(c)
		return nil
	})
	if err != nil {
		return err
	}
	return factorError(flag, p.Hq)
}

// hostRoundTrip runs a host-slice call on c: its codes and scales up
// through the ring, the kernels, and its output, LSE and score-factor
// flags (into c.flags) down. The caller is inside do.
func (b *kernelBackend) hostRoundTrip(d *device, st int, p *backend.Problem, c *hostCall) error {
	l := &c.l
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
	c.st, c.poison, c.lse = st, b.poison, len(p.LSE) > 0
	up, down := e.upSegs(p, l), e.downSegs(p, l, c.flags)
	if ph != nil {
		ph.phase("segs")
	}
	err = roundTrip(eng, e.ring, up, l.up, pro, c, down, l.down)
	if err := e.run(err); err != nil {
		return fmt.Errorf("cuda: a call on host slices: %w", err)
	}
	if ph != nil {
		ph.phase("returned")
	}
	return nil
}

// hostCall is the device side of a host-slice call: its block (laid out
// by l) and the residents that read and write it, one a group. The device
// keeps the last one (putHostCall), so that the next call of the same key
// finds its memory, its parameters and its tensor maps made. It is the
// round trip's tripKernels.
type hostCall struct {
	key   hostKey
	l     hostLayout
	blk   pooled
	rs    []*resident
	views []buffer // the block's pieces, for the residents
	flags []int32  // the groups' flags, as they come down
	// The call's: its stage, whether the outputs are poisoned before each
	// launch, whether it has an LSE.
	st          int
	poison, lse bool
}

func (c *hostCall) groups() int     { return len(c.rs) }
func (c *hostCall) upEnd(g int) int { return c.l.groups[g].upEnd }

// launch queues group g's attention (the outputs poisoned first, where
// asked). The caller is inside do.
func (c *hostCall) launch(g int) error {
	r := c.rs[g]
	if c.poison {
		if err := cu.MemsetD32Async(cu.DevicePtr(r.params.Out), poison.Bits, r.outN, r.dev.stream); err != nil {
			return err
		}
		if c.lse {
			if err := cu.MemsetD32Async(cu.DevicePtr(r.params.LSE), poison.Bits, int64(c.l.heads*c.l.shape.Sq), r.dev.stream); err != nil {
				return err
			}
		}
	}
	return r.launch(c.st)
}

// flag is the call's score-factor flag as factorError takes it: 1 + the
// (batch, query head) index of the first head a group flagged, 0 for
// none. A group's residents count the heads from its first.
func (c *hostCall) flag() int32 {
	for g, f := range c.flags {
		if f != 0 {
			return f + int32(g*c.l.heads)
		}
	}
	return 0
}

// release gives the block and the residents' memory back.
func (c *hostCall) release() error {
	var errs []error
	for _, r := range c.rs {
		errs = append(errs, r.release())
	}
	return errors.Join(errs...)
}

// hostKey is what a hostCall's block and resident depend on.
type hostKey struct {
	shape  backend.Shape
	layout backend.Layout
	mask   backend.Mask
	scale  float32
	lse    bool
	stage  int
	groups int // hostGroups
}

// newHostKey returns p's key, and whether its call may be kept (one with
// attention variants is not: its sinks are the call's).
func newHostKey(p *backend.Problem, st int) (hostKey, bool) {
	return hostKey{p.Shape, p.Layout, p.Mask, p.Scale, p.LSE != nil, st, hostGroups}, !p.Variants.Any()
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
		for _, r := range c.rs {
			for _, b := range r.bufs {
				d.pool[b.size] = append(d.pool[b.size], b.p)
			}
			r.bufs = nil
		}
	}
}

// newHostCall reserves the block of p's call and makes its residents,
// its groups' flags cleared. The caller is inside do.
func (d *device) newHostCall(p *backend.Problem, key hostKey) (*hostCall, error) {
	if _, _, err := problemShape(p); err != nil {
		return nil, err
	}
	c := &hostCall{key: key, l: newHostLayout(p)}
	l := &c.l
	ptr, size, err := d.alloc(int64(l.total))
	if err != nil {
		return nil, err
	}
	c.blk = pooled{ptr, size}
	g := len(l.groups)
	c.views, c.flags, c.rs = make([]buffer, 0, 8*g), make([]int32, g), make([]*resident, 0, g)
	sub := func(off, n int) *buffer {
		c.views = append(c.views, buffer{dev: d, buf: pooled{c.blk.p + cu.DevicePtr(off), int64(n)}, n: int64(n)})
		return &c.views[len(c.views)-1]
	}
	s := l.shape
	pg := *p
	pg.Shape = s
	nq, nkv, hkv := l.heads*s.Sq*s.D, s.B*s.Hkv*s.Sk*s.D, s.B*s.Hkv
	for i := range l.groups {
		x := &l.groups[i]
		in := [6]*buffer{sub(x.q, nq), sub(x.k, nkv), sub(x.v, nkv),
			sub(x.scales[0], 4*l.heads), sub(x.scales[1], 4*hkv), sub(x.scales[2], 4*hkv)}
		out := sub(x.out, 4*nq)
		out.flag = pooled{c.blk.p + cu.DevicePtr(x.flag), 4}
		var lse *buffer
		if p.LSE != nil {
			lse = sub(x.lse, 4*l.heads*s.Sq)
		}
		r, err := d.residentFor(&pg, in, out, lse)
		if err == nil {
			if len(c.rs) == 0 {
				r.bufs = append(r.bufs, c.blk) // released with the first resident's own
			}
			c.rs = append(c.rs, r)
			err = r.setUp(in, out, lse)
		}
		if err != nil {
			if len(c.rs) == 0 {
				err = errors.Join(err, d.release([]pooled{c.blk}))
			}
			return nil, errors.Join(err, c.release())
		}
		if err := cu.MemsetD32Async(cu.DevicePtr(out.flag.p), 0, 1, d.stream); err != nil {
			return nil, errors.Join(err, c.release())
		}
	}
	return c, nil
}

var _ backend.OnReadScaler = (*kernelBackend)(nil)
