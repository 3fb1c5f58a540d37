//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

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
// host (the source of an upload, the destination of a download).
type hostCopy struct {
	dev  cu.DevicePtr
	host []byte
}

// bytesOf views a slice of plain numbers as its bytes.
func bytesOf[T ~uint8 | ~float32 | ~int32](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(x[0])))
}

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
func (d *Device) staging(n int) ([]byte, error) {
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
func (d *Device) upload(copies []hostCopy) error {
	n := stagedBytes(copies)
	var pinned [][]byte
	if n <= stagingMax {
		buf, err := d.staging(n)
		if err != nil {
			return err
		}
		var host [][]byte
		pinned, host = staged(buf, copies)
		parallelCopy(pinned, host)
	}
	for i, c := range copies {
		if len(c.host) == 0 {
			continue
		}
		src := unsafe.Pointer(&c.host[0])
		if pinned != nil {
			src = unsafe.Pointer(&pinned[i][0])
		}
		if err := cu.MemcpyHtoDAsync(c.dev, src, int64(len(c.host)), d.stream); err != nil {
			return fmt.Errorf("cuda: upload: %w", err)
		}
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
func (d *Device) download(copies []hostCopy) error {
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
