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
// base: the device's page-locked buffer as its ring (sized for the larger
// of the call's two regions, up to pipeRingMax bytes; the call holds it
// until close), and events for the ring's slots from the device's spares.
// The caller is inside do until close.
func (d *device) newStreamEngine(l hostLayout, base cu.DevicePtr) (*streamEngine, error) {
	ring, err := d.staging(min(max(l.up, l.down), pipeRingMax))
	if err != nil {
		return nil, err
	}
	e := &streamEngine{d: d, base: base, ring: ring}
	slots := 0
	for i, size := range []int{l.up, l.down} {
		_, _, n, err := pipePlan(size, len(ring), [2]int{encodeWeight, 1}[i])
		if err != nil {
			return nil, err
		}
		slots = max(slots, n)
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

// run returns err; where it is not nil, first waits for the stream, so that
// no queued copy still reads or writes the ring when the call returns.
func (e *streamEngine) run(err error) error {
	if err != nil {
		e.d.stream.Synchronize() // (a failed kernel's error is err's news already)
	}
	return err
}

// close gives the events back to the device's spares. The ring is idle:
// the call's download has waited for every copy, or run for the stream.
func (e *streamEngine) close() {
	e.d.events = append(e.d.events, e.events...)
	e.events = nil
}

// upSegs are the host pieces of the way up, in the block's first l.up
// bytes (the engine's base: the block): the codes of p's Q, K and V, their
// scales (p's, or with ScalesOnRead the prologue's), and the zero flag.
func (e *streamEngine) upSegs(p *backend.Problem, l hostLayout) []hostSeg {
	s := p.Shape
	qs, ks, vs := p.QScale, p.KScale, p.VScale
	nq, nkv := s.B*s.Hq, s.B*s.Hkv
	if p.ScalesOnRead { // the prologue's (amax), Q's heads, then K's, then V's
		e.scales = freelist.Grow(e.d.hostScales, nq+2*nkv)
		e.d.hostScales = e.scales
		qs, ks, vs = e.scales[:nq], e.scales[nq:nq+nkv], e.scales[nq+nkv:]
	}
	e.enc = encodeSet{
		{x: p.Q, scales: qs, heads: s.Hq, seq: s.Sq, d: s.D, layout: p.Layout, item0: -1},
		{x: p.K, scales: ks, heads: s.Hkv, seq: s.Sk, d: s.D, layout: p.Layout, item0: -1},
		{x: p.V, scales: vs, heads: s.Hkv, seq: s.Sk, d: s.D, layout: p.Layout, item0: -1},
	}
	if p.ScalesOnRead {
		e.d.hostAcc = e.enc.plan(e.d.hostAcc)
	}
	e.vScales = vs
	after := p.ScalesOnRead
	e.segs = [7]hostSeg{{off: l.q, enc: &e.enc[0]}, {off: l.k, enc: &e.enc[1]}, {off: l.v, enc: &e.enc[2]},
		{off: l.scales[0], host: bytesOf(qs), after: after}, {off: l.scales[1], host: bytesOf(ks), after: after},
		{off: l.scales[2], host: bytesOf(vs), after: after}, {off: l.flag, host: zeroWord[:]}}
	return e.segs[:]
}

// downSegs are the host pieces of the way down, from the flag on (the
// engine's base: the block's flag): the flag into flag, the float16 output
// into p.Out (times the unit the launch sets in e.out16), the LSE into
// p.LSE where p has one.
func (e *streamEngine) downSegs(p *backend.Problem, l hostLayout, flag []int32) []hostSeg {
	e.out16 = halfDst{out: p.Out}
	segs := append(e.down[:0], hostSeg{off: 0, host: bytesOf(flag)}, hostSeg{off: l.out16 - l.flag, dec: &e.out16})
	if p.LSE != nil {
		segs = append(segs, hostSeg{off: l.lse - l.flag, host: bytesOf(p.LSE)})
	}
	return segs
}

// streamEngine is the device's stream as a hostEngine: copies between the
// ring and the device memory at base, and an event a slot. The pipe calls
// its methods from the goroutine inside do only (its one voice to the
// driver); each still binds the device's context to its thread for the
// call, as the interface allows any goroutine.
type streamEngine struct {
	d      *device
	base   cu.DevicePtr
	ring   []byte
	events []cu.Event
	segs   [7]hostSeg // the way up
	down   [3]hostSeg // the way down
	enc    encodeSet
	scales []float32 // Q, K, V scales the prologue computes (the device's hostScales)
	// vScales are V's scales, the prologue's or the caller's; out16 is the
	// float16 output's way into p.Out, its factor and unit set from
	// vScales at the launch.
	vScales []float32
	out16   halfDst
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
	if err := cu.MemcpyHtoDAsync(e.base+cu.DevicePtr(off), unsafe.Pointer(&src[0]), int64(len(src)), e.d.stream); err != nil {
		return fmt.Errorf("cuda: upload: %w", err)
	}
	return nil
}

func (e *streamEngine) toHost(dst []byte, off int) error {
	if err := e.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), e.base+cu.DevicePtr(off), int64(len(dst)), e.d.stream); err != nil {
		return fmt.Errorf("cuda: download: %w", err)
	}
	return nil
}

func (e *streamEngine) record(slot int) error {
	if err := e.bind(); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	return e.events[slot].Record(e.d.stream)
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
