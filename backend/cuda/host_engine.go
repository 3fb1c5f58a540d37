//go:build cuda

package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/freelist"
)

// newStreamEngine returns the engine of a call of layout l at the block
// base: the device's page-locked buffer as its ring (l.ring bytes at
// least; the call holds it until close), events for the ring's slots from
// the device's spares, and, where the call's heads go in groups, the
// device's second stream as the down lane. The caller is inside do until
// close.
func (d *device) newStreamEngine(l *hostLayout, base cu.DevicePtr) (*streamEngine, error) {
	ring, err := d.staging(l.ring)
	if err != nil {
		return nil, err
	}
	e := &streamEngine{d: d, up: base, down: base + cu.DevicePtr(l.down0), ring: ring, downLane: d.stream}
	_, _, ups, err := pipePlan(l.up, len(ring), encodeWeight)
	if err != nil {
		return nil, err
	}
	_, _, downs, err := pipePlan(l.down, len(ring), 1)
	if err != nil {
		return nil, err
	}
	slots := max(ups, downs)
	if g := len(l.groups); g > 1 {
		if e.downLane, err = d.secondStream(); err != nil {
			return nil, err
		}
		slots = ups + g + 1 // and the fence's
	}
	for len(e.events) < slots {
		var ev cu.Event
		if n := len(d.events); n > 0 {
			ev, d.events = d.events[n-1], d.events[:n-1]
		} else if ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			e.close()
			return nil, fmt.Errorf("cuda: event: %w", err)
		}
		e.events = append(e.events, ev)
	}
	return e, nil
}

// secondStream returns the device's second stream, made on first use: the
// down lane of a host-slice call whose heads go in groups. The call waits
// for its work before it returns. The caller is inside do.
func (d *device) secondStream() (cu.Stream, error) {
	if d.stream2 == (cu.Stream{}) {
		s, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return s, fmt.Errorf("cuda: stream: %w", err)
		}
		d.stream2 = s
	}
	return d.stream2, nil
}

// run returns err; where it is not nil, first waits for both lanes, so
// that no queued copy still reads or writes the ring when the call
// returns.
func (e *streamEngine) run(err error) error {
	if err != nil {
		e.d.stream.Synchronize() // (a failed kernel's error is err's news already)
		e.downLane.Synchronize()
	}
	return err
}

// close gives the events back to the device's spares. The ring is idle:
// the call's download has waited for every copy, or run for the lanes.
func (e *streamEngine) close() {
	e.d.events = append(e.d.events, e.events...)
	e.events = nil
}

// upSegs are the host pieces of the way up, from the block's start: each
// group's codes of p's Q, K and V and their scales (p's, or with
// ScalesOnRead the prologue's, each tensor's waiting for its items).
func (e *streamEngine) upSegs(p *backend.Problem, l *hostLayout) []hostSeg {
	s, gs := p.Shape, l.shape
	qs, ks, vs := p.QScale, p.KScale, p.VScale
	nq, nkv := s.B*s.Hq, s.B*s.Hkv
	if p.ScalesOnRead { // the prologue's (amax), Q's heads, then K's, then V's
		e.scales = freelist.Grow(e.d.hostScales, nq+2*nkv)
		e.d.hostScales = e.scales
		qs, ks, vs = e.scales[:nq], e.scales[nq:nq+nkv], e.scales[nq+nkv:]
	}
	g := len(l.groups)
	qn, kvn := len(p.Q)/g, len(p.K)/g // a group's elements
	hq, hkv := l.heads, nkv/g         // a group's heads
	e.enc = freelist.Grow(e.d.hostEnc, 3*g)
	e.d.hostEnc = e.enc
	for i := range g {
		e.enc[3*i] = encodeSrc{x: p.Q[i*qn : (i+1)*qn], scales: qs[i*hq : (i+1)*hq], heads: gs.Hq, seq: s.Sq, d: s.D, layout: p.Layout, item0: -1}
		e.enc[3*i+1] = encodeSrc{x: p.K[i*kvn : (i+1)*kvn], scales: ks[i*hkv : (i+1)*hkv], heads: gs.Hkv, seq: s.Sk, d: s.D, layout: p.Layout, item0: -1}
		e.enc[3*i+2] = encodeSrc{x: p.V[i*kvn : (i+1)*kvn], scales: vs[i*hkv : (i+1)*hkv], heads: gs.Hkv, seq: s.Sk, d: s.D, layout: p.Layout, item0: -1}
	}
	if p.ScalesOnRead {
		e.d.hostAcc = e.enc.plan(e.d.hostAcc)
	}
	segs := freelist.Grow(e.d.hostSegs, 6*g)[:0]
	for i := range l.groups {
		x := &l.groups[i]
		for t, off := range [3]int{x.q, x.k, x.v} {
			segs = append(segs, hostSeg{off: off, enc: &e.enc[3*i+t]})
		}
		for t, off := range x.scales {
			src := &e.enc[3*i+t]
			seg := hostSeg{off: off, host: bytesOf(src.scales)}
			if p.ScalesOnRead {
				seg.after = [2]int{src.item0, src.item0 + len(src.scales)*src.parts}
			}
			segs = append(segs, seg)
		}
	}
	e.d.hostSegs = segs
	return segs
}

// downSegs are the host pieces of the way down, from the down region's
// start: each group's flag into flags, its output into its part of p.Out,
// its LSE into its part of p.LSE where p has one.
func (e *streamEngine) downSegs(p *backend.Problem, l *hostLayout, flags []int32) []hostSeg {
	g := len(l.groups)
	segs := freelist.Grow(e.d.hostDown, 3*g)[:0]
	on, ln := len(p.Out)/g, len(p.LSE)/g
	for i := range l.groups {
		x := &l.groups[i]
		segs = append(segs, hostSeg{off: x.flag - l.down0, host: bytesOf(flags[i : i+1])},
			hostSeg{off: x.out - l.down0, host: bytesOf(p.Out[i*on : (i+1)*on])})
		if p.LSE != nil {
			segs = append(segs, hostSeg{off: x.lse - l.down0, host: bytesOf(p.LSE[i*ln : (i+1)*ln])})
		}
	}
	e.d.hostDown = segs
	return segs
}

// streamEngine is the device's stream as a hostEngine's up lane, and it
// or the device's second stream as its down lane: copies between the ring
// and the regions at up and down, and an event a slot. The pipe calls its
// methods from the goroutine inside do only (its one voice to the
// driver); each still binds the device's context to its thread for the
// call, as the interface allows any goroutine.
type streamEngine struct {
	d        *device
	up, down cu.DevicePtr // the regions
	downLane cu.Stream
	ring     []byte
	events   []cu.Event // the slots', then (with a second lane) the fence's
	enc      encodeSet
	scales   []float32 // Q, K, V scales the prologue computes (the device's hostScales)
}

func (e *streamEngine) bind() error {
	runtime.LockOSThread()
	if err := setCurrent(e.d.ctx); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

func (e *streamEngine) toDevice(off int, src []byte) error {
	if err := e.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	if err := cu.MemcpyHtoDAsync(e.up+cu.DevicePtr(off), unsafe.Pointer(&src[0]), int64(len(src)), e.d.stream); err != nil {
		return fmt.Errorf("cuda: upload: %w", err)
	}
	return nil
}

func (e *streamEngine) toHost(dst []byte, off int) error {
	if err := e.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), e.down+cu.DevicePtr(off), int64(len(dst)), e.downLane); err != nil {
		return fmt.Errorf("cuda: download: %w", err)
	}
	return nil
}

func (e *streamEngine) record(slot int, up bool) error {
	if err := e.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	return e.events[slot].Record(e.lane(up))
}

// lane is the up lane's stream (up) or the down lane's.
func (e *streamEngine) lane(up bool) cu.Stream {
	if up {
		return e.d.stream
	}
	return e.downLane
}

func (e *streamEngine) fence() error {
	if e.downLane == e.d.stream {
		return nil
	}
	if err := e.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	ev := e.events[len(e.events)-1]
	if err := ev.Record(e.d.stream); err != nil {
		return err
	}
	return e.downLane.Wait(ev, 0)
}

func (e *streamEngine) done(slot int) (bool, error) {
	if err := e.bind(); err != nil {
		return false, err
	}
	defer runtime.UnlockOSThread()
	switch err := e.events[slot].Query(); err {
	case nil:
		return true, nil
	case cu.NotReady:
		return false, nil
	default:
		return false, err
	}
}
