//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
)

// buffer is device memory of a device, from its pool (never managed
// memory). Its contents are ordered with all other work of the device on
// its stream.
type buffer struct {
	dev *device
	buf pooled
	n   int64
	// flag is a device word (0 when unused) where an attention that wrote
	// into this buffer (kernelBackend.AttentionOn) flags a score factor beyond
	// backend.MaxScoreFactor; Read reports and clears it.
	flag pooled
	// pins counts the live graphs that use the buffer (Free fails while
	// it is not 0). Guarded by the device's lock.
	pins int
}

// Alloc returns a buffer of n bytes (n > 0). Its contents are undefined
// until written.
func (d *device) Alloc(n int64) (*buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: cuda: allocating %d bytes", backend.ErrInvalid, n)
	}
	b := &buffer{dev: d, n: n}
	err := d.do(func() error {
		p, size, err := d.alloc(n)
		b.buf = pooled{p, size}
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Len returns the buffer's size in bytes.
func (b *buffer) Len() int64 { return b.n }

// capturing returns the capture the calling goroutine records on b's
// device, or nil.
func (b *buffer) capturing() *captureState {
	if b == nil || b.dev == nil {
		return nil
	}
	return b.dev.capturing()
}

func (b *buffer) live() error {
	if b == nil || b.dev == nil {
		return fmt.Errorf("%w: cuda: nil buffer", backend.ErrInvalid)
	}
	if b.buf.p == 0 {
		return fmt.Errorf("%w: cuda: buffer used after Free", backend.ErrInvalid)
	}
	return nil
}

// fits checks that b is a live buffer of device d holding at least want
// bytes (the name says which operand, in the error).
func (b *buffer) fits(d *device, want int64, name string) error {
	if err := b.live(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if b.dev != d || b.n < want {
		return fmt.Errorf("%w: cuda: %s holds %d bytes of device %d, %d needed on device %d", backend.ErrInvalid, name, b.n, b.dev.Ordinal, want, d.Ordinal)
	}
	return nil
}

// Write copies src to the start of the buffer, on the stream; src may be
// reused when Write returns.
func (b *buffer) Write(src []byte) error {
	if err := b.live(); err != nil {
		return err
	}
	if int64(len(src)) > b.n {
		return fmt.Errorf("%w: cuda: writing %d bytes into a buffer of %d", backend.ErrInvalid, len(src), b.n)
	}
	return b.dev.do(func() error { return b.dev.upload([]hostCopy{{dev: b.buf.p, host: src}}) })
}

// Read copies the start of the buffer into dst behind the work issued on
// the stream, and waits for it (a kernel's failure is reported here).
func (b *buffer) Read(dst []byte) error {
	if err := b.live(); err != nil {
		return err
	}
	if int64(len(dst)) > b.n {
		return fmt.Errorf("%w: cuda: reading %d bytes from a buffer of %d", backend.ErrInvalid, len(dst), b.n)
	}
	return b.dev.do(func() error {
		copies := []hostCopy{{dev: b.buf.p, host: dst}}
		var flag [1]int32
		if b.flag.p != 0 {
			copies = append(copies, hostCopy{dev: b.flag.p, host: bytesOf(flag[:])})
		}
		if err := b.dev.download(copies); err != nil {
			return err
		}
		if flag[0] == 0 {
			return nil
		}
		if err := cu.MemsetD32Async(b.flag.p, 0, 1, b.dev.stream); err != nil {
			return err
		}
		return fmt.Errorf("an attention that wrote this buffer: %w", factorError(flag[0], 0))
	})
}

// Free returns the buffer to the device's pool once the work issued on it
// so far has completed. A second Free does nothing.
func (b *buffer) Free() error {
	if b == nil || b.dev == nil || b.buf.p == 0 {
		return nil
	}
	return b.dev.do(func() error {
		if b.pins > 0 {
			return fmt.Errorf("%w: cuda: freeing a buffer that %d live graph(s) use: Close them first", backend.ErrInvalid, b.pins)
		}
		bufs := []pooled{b.buf}
		if b.flag.p != 0 {
			bufs = append(bufs, b.flag)
		}
		b.buf, b.flag = pooled{}, pooled{}
		return b.dev.release(bufs)
	})
}

// Zero sets the buffer's bytes to 0, on the stream.
func (b *buffer) Zero() error {
	if err := b.live(); err != nil {
		return err
	}
	return b.dev.do(func() error {
		if c := b.capturing(); c != nil {
			c.pin(b)
		}
		if b.n%4 == 0 {
			return cu.MemsetD32Async(b.buf.p, 0, b.n/4, b.dev.stream)
		}
		return cu.MemsetD8Async(b.buf.p, 0, b.n, b.dev.stream)
	})
}

// Alloc implements backend.Memory on device 0.
func (b *kernelBackend) Alloc(n int64) (backend.Buffer, error) {
	d, err := openDevice(0)
	if err != nil {
		return nil, err
	}
	buf, err := d.Alloc(n)
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// ours returns the cuda buffers behind backend buffers (nil stays nil),
// pinned to the graph when the caller is capturing one.
func ours(bufs ...backend.Buffer) ([]*buffer, error) {
	out := make([]*buffer, len(bufs))
	for i, b := range bufs {
		if b == nil {
			continue
		}
		cb, ok := b.(*buffer)
		if !ok {
			return nil, fmt.Errorf("%w: cuda: a buffer of another backend (%T)", backend.ErrInvalid, b)
		}
		out[i] = cb
		if c := cb.capturing(); c != nil {
			c.pin(cb)
		}
	}
	return out, nil
}

// Held implements backend.Memory: device 0's MemoryHeld (0 before it opens).
func (b *kernelBackend) Held() int64 {
	devicesMu.Lock()
	d := devices[0]
	devicesMu.Unlock()
	if d == nil {
		return 0
	}
	return d.MemoryHeld()
}

// SetLimit implements backend.Memory: device 0's SetMemoryLimit.
func (b *kernelBackend) SetLimit(n int64) error {
	d, err := openDevice(0)
	if err != nil {
		return err
	}
	return d.SetMemoryLimit(n)
}

var (
	_ backend.Memory = (*kernelBackend)(nil)
	_ backend.Buffer = (*buffer)(nil)
)
