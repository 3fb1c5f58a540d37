//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/checked"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// A call on float32 host slices (backend.Problem.ScalesOnRead) copies the
// inputs to the device as they are, through the page-locked ring
// (transfer: one memmove and one DMA per byte, chunked and overlapped),
// quantizes them there (quant_pack9 or the one-tile form that quantizes
// its own inputs where stage 9 fuses them, the quantization kernels
// otherwise), runs the attention, and brings the output (and LSE) back
// the same way. Nothing on the host reads the inputs but the memmove.
// The device memory of a call is one block from the pool, reused by the
// next call of the shape:
//
//	Q, K, V (float32) | flag | out | LSE | Q, K, V scales | Q, K, V codes
//
// The inputs and the score-factor flag (a zero word, so that no memset
// clears it) go up as one region; the flag, the output and the LSE come
// down as one.

// hostMaxHeads bounds B·Hq for the quantization kernels' grids (a head a
// grid row; Quantize refuses more).
const hostMaxHeads = 65535

// ScalesOnRead implements backend.OnReadScaler: the backend quantizes p's
// float32 inputs on the device, scales included, where the quantization
// kernels' grids take its heads and its sizes fit the kernels' indices.
func (b *kernelBackend) ScalesOnRead(p *backend.Problem) bool {
	if p == nil || p.Variants.Any() {
		return false
	}
	if _, _, err := problemShape(p); err != nil {
		return false
	}
	heads, ok := checked.Mul(p.B, p.Hq)
	return ok && heads <= hostMaxHeads
}

// hostLayout is where a host-slice call's pieces lie in its device block
// (byte offsets, each aligned to stagingAlign).
type hostLayout struct {
	q, k, v, flag, out, lse int
	scales                  [3]int
	codes                   [3]int // (fused calls have none)
	up, down                int    // the region sizes: [0, up) goes up, [flag, flag+down) comes down
	total                   int
}

func newHostLayout(p *backend.Problem, nq, nkv int, fused bool) hostLayout {
	var l hostLayout
	off := 0
	at := func(n int) int {
		o := off
		off += alignUp(n)
		return o
	}
	l.q, l.k, l.v = at(4*nq), at(4*nkv), at(4*nkv)
	l.flag = at(4)
	l.up = l.flag + 4
	l.out = at(4 * nq)
	end := l.out + 4*nq
	if p.LSE != nil {
		l.lse = at(4 * p.B * p.Hq * p.Sq)
		end = l.lse + 4*p.B*p.Hq*p.Sq
	}
	l.down = end - l.flag
	l.scales = [3]int{at(4 * p.B * p.Hq), at(4 * p.B * p.Hkv), at(4 * p.B * p.Hkv)}
	if !fused {
		l.codes = [3]int{at(nq), at(nkv), at(nkv)}
	}
	l.total = off
	return l
}

// zeroWord is the flag's bytes on the way up.
var zeroWord [4]byte

// hostAttention computes p (validated, ScalesOnRead) on stage st of d.
func (b *kernelBackend) hostAttention(d *device, st int, p *backend.Problem) (err error) {
	if d.capturing() != nil {
		return errCapture("copying host memory to the device")
	}
	nq64, nkv64, err := problemShape(p)
	if err != nil {
		return err
	}
	s := p.Shape
	if s.B*s.Hq > hostMaxHeads {
		return fmt.Errorf("%w: cuda: %d heads to quantize on the device (at most %d)", backend.ErrUnsupported, s.B*s.Hq, hostMaxHeads)
	}
	nq, nkv := int(nq64), int(nkv64)
	fused := st == tiles.HopperStage && d.hopperErr == nil && d.fusable(p) && s.B*s.Hq+2*s.B*s.Hkv <= hostMaxHeads
	l := newHostLayout(p, nq, nkv, fused)
	var blk pooled
	if err := d.do(func() error {
		ptr, size, err := d.alloc(int64(l.total))
		blk = pooled{ptr, size}
		return err
	}); err != nil {
		return err
	}
	var views [11]buffer // the block's pieces as buffers (one allocation)
	used := 0
	sub := func(off, n int) *buffer {
		b := &views[used]
		used++
		*b = buffer{dev: d, buf: pooled{blk.p + cu.DevicePtr(off), int64(n)}, n: int64(n)}
		return b
	}
	in := [6]*buffer{sub(l.q, 4*nq), sub(l.k, 4*nkv), sub(l.v, 4*nkv),
		sub(l.scales[0], 4*s.B*s.Hq), sub(l.scales[1], 4*s.B*s.Hkv), sub(l.scales[2], 4*s.B*s.Hkv)}
	src := in
	if !fused {
		in[0], in[1], in[2] = sub(l.codes[0], nq), sub(l.codes[1], nkv), sub(l.codes[2], nkv)
	}
	out := sub(l.out, 4*nq)
	out.flag = pooled{blk.p + cu.DevicePtr(l.flag), 4}
	var lse *buffer
	if p.LSE != nil {
		lse = sub(l.lse, 4*s.B*s.Hq*s.Sq)
	}
	r, err := d.newResident(p, in, out, lse)
	if err != nil {
		return errors.Join(err, d.do(func() error { return d.release([]pooled{blk}) }))
	}
	r.fused = fused
	r.bufs = append(r.bufs, blk) // released with the resident's own
	defer func() { err = errors.Join(err, r.Free()) }()
	var flag [1]int32
	err = d.do(func() error {
		e, err := d.newStreamEngine(l, blk.p)
		if err != nil {
			return err
		}
		defer e.close()
		var eng hostEngine = e
		if b.hostEngine != nil {
			eng = b.hostEngine(e)
		}
		if err := e.run(transfer(eng, e.ring, e.upSegs(p, l), l.up, true)); err != nil {
			return err
		}
		if !fused {
			if err := e.run(d.hostQuantize(p, src, in)); err != nil {
				return err
			}
		}
		if b.poison {
			if err := e.run(cu.MemsetD32Async(cu.DevicePtr(r.params.Out), poison.Bits, int64(nq), d.stream)); err != nil {
				return err
			}
			if len(p.LSE) > 0 {
				if err := e.run(cu.MemsetD32Async(cu.DevicePtr(r.params.LSE), poison.Bits, int64(len(p.LSE)), d.stream)); err != nil {
					return err
				}
			}
		}
		if err := e.run(r.launch(st)); err != nil {
			return err
		}
		e.base = blk.p + cu.DevicePtr(l.flag)
		if err := e.run(transfer(eng, e.ring, e.downSegs(p, l, flag[:]), l.down, false)); err != nil {
			return fmt.Errorf("cuda: kernel failed, or the download: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return factorError(flag[0], s.Hq)
}

// hostQuantize quantizes the float32 inputs src into the codes and scales
// of in, on the stream: one launch of each phase for the three tensors
// where the grid takes their heads together. The caller is inside do.
func (d *device) hostQuantize(p *backend.Problem, src, in [6]*buffer) error {
	s := p.Shape
	var ts [3]quantTensor
	for i := range 3 {
		h, n := s.Hkv, s.Sk
		if i == 0 {
			h, n = s.Hq, s.Sq
		}
		ts[i] = quantTensorOf(src[i], in[i], in[3+i], tensorShape{s.B, h, n, s.D, p.Layout})
	}
	if s.B*s.Hq+2*s.B*s.Hkv <= hostMaxHeads {
		return d.quantize(&quantParams{T: ts, N: 3})
	}
	for _, t := range ts {
		if err := d.quantize(&quantParams{T: [3]quantTensor{t}, N: 1}); err != nil {
			return err
		}
	}
	return nil
}

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
	for _, size := range []int{l.up, l.down} {
		_, _, n, err := pipePlan(size, len(ring))
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

// upSegs are the host pieces of the way up: p's float32 Q, K and V and the
// zero flag, in the block's first l.up bytes (the engine's base: the
// block).
func (e *streamEngine) upSegs(p *backend.Problem, l hostLayout) []hostSeg {
	e.segs = [4]hostSeg{{l.q, bytesOf(p.Q)}, {l.k, bytesOf(p.K)}, {l.v, bytesOf(p.V)}, {l.flag, zeroWord[:]}}
	return e.segs[:]
}

// downSegs are the host pieces of the way down, from the flag on (the
// engine's base: the block's flag): the flag into flag, the output into
// p.Out, the LSE into p.LSE where p has one.
func (e *streamEngine) downSegs(p *backend.Problem, l hostLayout, flag []int32) []hostSeg {
	segs := append(e.segs[:0], hostSeg{0, bytesOf(flag)}, hostSeg{l.out - l.flag, bytesOf(p.Out)})
	if p.LSE != nil {
		segs = append(segs, hostSeg{l.lse - l.flag, bytesOf(p.LSE)})
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
	segs   [4]hostSeg
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

var _ backend.OnReadScaler = (*kernelBackend)(nil)
