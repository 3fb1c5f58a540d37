//go:build cuda

package cuda

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/fp8"
	"gorgonia.org/cu"
)

// Copies between Go memory and the device go through one page-locked host
// buffer per device when they are small (a call's inputs or outputs up to
// stagingMax bytes together): the driver copies pageable memory through a
// bounce buffer of its own at a fraction of the bus's speed (on the H200 a
// 1 MB download took about 190 µs), while a copy from page-locked memory is
// one DMA. Larger transfers, where the kernels dominate, stay pageable.

// stagingMax is the largest transfer (one call's uploads, or its downloads)
// staged through page-locked memory.
const stagingMax = 16 << 20

// stagingAlign aligns each piece of a staged transfer.
const stagingAlign = 256

// hostCopy is one piece of a transfer: device memory dev and the Go bytes
// host (the source of an upload, the destination of a download). A joined
// piece lies in the same device buffer as the piece before it, where the
// staging buffer puts it (putJoined): an upload moves both in one copy.
type hostCopy struct {
	dev    cu.DevicePtr
	host   []byte
	joined bool
}

// uploadCopies counts the host-to-device copies device.upload issues
// (tests: a paged call's tables go in one).
var uploadCopies atomic.Int64

// alignUp rounds n up to a multiple of stagingAlign.
func alignUp(n int) int { return (n + stagingAlign - 1) / stagingAlign * stagingAlign }

// stagedBytes is the staging space copies take, each piece aligned.
func stagedBytes(copies []hostCopy) int {
	n := 0
	for _, c := range copies {
		n += alignUp(len(c.host))
	}
	return n
}

// staging returns the device's page-locked buffer, at least n bytes, once
// the copies that read it before have completed. The caller is inside do.
func (d *device) staging(n int) ([]byte, error) {
	if d.stageBusy {
		if err := d.stageDone.Synchronize(); err != nil {
			return nil, fmt.Errorf("cuda: staged copy: %w", err)
		}
		d.stageBusy = false
	}
	if len(d.stage) < n {
		if err := hostFree(d.stage); err != nil {
			return nil, err
		}
		d.stage = nil
		size := 1 << 20
		for size < n {
			size <<= 1
		}
		b, err := hostAlloc(size)
		if err != nil {
			return nil, err
		}
		d.stage = b
	}
	return d.stage, nil
}

// staged lays copies out in buf, each piece aligned, and returns where each
// piece's bytes go there, and the host side of each.
func staged(buf []byte, copies []hostCopy) (pinned, host [][]byte) {
	pinned, host = make([][]byte, len(copies)), make([][]byte, len(copies))
	off := 0
	for i, c := range copies {
		pinned[i], host[i] = buf[off:off+len(c.host)], c.host
		off += alignUp(len(c.host))
	}
	return pinned, host
}

// upload copies each piece's host bytes to its device memory, on the
// stream, staged through page-locked memory when they are small together.
// The Go memory may be reused when upload returns. The caller is inside do.
func (d *device) upload(copies []hostCopy) error {
	if d.capturing() != nil {
		return errCapture("copying host memory to the device")
	}
	n := stagedBytes(copies)
	var pinned [][]byte
	if n <= stagingMax {
		buf, err := d.staging(n)
		if err != nil {
			return err
		}
		var host [][]byte
		pinned, host = staged(buf, copies)
		parallelMove(pinned, host, n <= streamMax) // (the bus reads the lines next: host_pipe.go)
	}
	for i := 0; i < len(copies); i++ {
		c := copies[i]
		if len(c.host) == 0 {
			continue
		}
		src, size := unsafe.Pointer(&c.host[0]), len(c.host)
		if pinned != nil {
			src = unsafe.Pointer(&pinned[i][0])
			// The pieces joined to it go in its copy.
			for i+1 < len(copies) && copies[i+1].joined {
				i++
				size = alignUp(size) + len(copies[i].host)
			}
		}
		if err := cu.MemcpyHtoDAsync(c.dev, src, int64(size), d.stream); err != nil {
			return fmt.Errorf("cuda: upload: %w", err)
		}
		uploadCopies.Add(1)
	}
	if pinned != nil {
		if err := d.stageDone.Record(d.stream); err != nil {
			return fmt.Errorf("cuda: event record: %w", err)
		}
		d.stageBusy = true
	}
	return nil
}

// download copies each piece's device memory into its host bytes, behind
// the work issued on the stream, and waits for it: an error from any
// kernel before it is reported here. The caller is inside do.
func (d *device) download(copies []hostCopy) error {
	if d.capturing() != nil {
		return errCapture("copying device memory to the host")
	}
	n := stagedBytes(copies)
	var pinned, host [][]byte
	if n <= stagingMax {
		buf, err := d.staging(n)
		if err != nil {
			return err
		}
		pinned, host = staged(buf, copies)
	}
	for i, c := range copies {
		if len(c.host) == 0 {
			continue
		}
		dst := unsafe.Pointer(&c.host[0])
		if pinned != nil {
			dst = unsafe.Pointer(&pinned[i][0])
		}
		if err := cu.MemcpyDtoHAsync(dst, c.dev, int64(len(c.host)), d.stream); err != nil {
			return fmt.Errorf("cuda: download: %w", err)
		}
	}
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda: kernel failed: %w", err)
	}
	if pinned != nil {
		parallelCopy(host, pinned)
	}
	return nil
}

// inputLayout is where a problem's inputs go in the one device block (and
// page-locked region) Upload copies them through: Q, K and V codes, then
// the Q, K, V and score scales, each piece aligned.
type inputLayout struct {
	p      *backend.Problem
	pieces [7][]byte // the host bytes of each piece (nil for codes encoded on read)
	size   [7]int
	off    [7]int
	total  int
}

func uploadLayout(p *backend.Problem, scores []float32) inputLayout {
	l := inputLayout{p: p}
	if p.QuantizeOnRead {
		l.size[0], l.size[1], l.size[2] = len(p.Q), len(p.K), len(p.V)
	} else {
		l.pieces[0], l.pieces[1], l.pieces[2] = bytesOf(p.Q8), bytesOf(p.K8), bytesOf(p.V8)
	}
	l.pieces[3], l.pieces[4], l.pieces[5], l.pieces[6] = bytesOf(p.QScale), bytesOf(p.KScale), bytesOf(p.VScale), bytesOf(scores)
	for i := range l.pieces {
		if l.pieces[i] != nil {
			l.size[i] = len(l.pieces[i])
		}
		l.off[i] = l.total
		l.total += alignUp(l.size[i])
	}
	return l
}

// fill writes the inputs into buf (l.total bytes): codes copied or encoded
// on read, on par.Default's helpers, then the scales.
func (l inputLayout) fill(buf []byte) {
	var dst, src [][]byte
	for i, piece := range l.pieces {
		if piece != nil {
			dst, src = append(dst, buf[l.off[i]:l.off[i]+l.size[i]]), append(src, piece)
		}
	}
	parallelCopy(dst, src)
	if l.p.QuantizeOnRead {
		p := l.p
		codes := func(i int) []fp8.E4M3 {
			b := buf[l.off[i] : l.off[i]+l.size[i]]
			return unsafe.Slice((*fp8.E4M3)(unsafe.Pointer(&b[0])), len(b))
		}
		encodeOnRead([]encodeTensor{
			{codes(0), p.Q, p.QScale, p.Hq, p.Sq},
			{codes(1), p.K, p.KScale, p.Hkv, p.Sk},
			{codes(2), p.V, p.VScale, p.Hkv, p.Sk},
		}, p.B, p.D, p.Layout)
	}
}

// uploadInputs copies the inputs to the device block at dev in one copy on
// the stream: staged through page-locked memory when they fit, else from a
// Go buffer (pageable). The caller is inside do.
func (d *device) uploadInputs(dev cu.DevicePtr, l inputLayout) error {
	if d.capturing() != nil {
		return errCapture("copying host memory to the device")
	}
	var buf []byte
	small := l.total <= stagingMax
	if small {
		var err error
		if buf, err = d.staging(l.total); err != nil {
			return err
		}
	} else {
		buf = make([]byte, l.total)
	}
	l.fill(buf)
	if err := cu.MemcpyHtoDAsync(dev, unsafe.Pointer(&buf[0]), int64(l.total), d.stream); err != nil {
		return fmt.Errorf("cuda: upload: %w", err)
	}
	if !small {
		// A pageable copy has consumed its source when the call returns.
		return nil
	}
	if err := d.stageDone.Record(d.stream); err != nil {
		return fmt.Errorf("cuda: event record: %w", err)
	}
	d.stageBusy = true
	return nil
}
