//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/ntcopy"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// eightWayCopy copies src to dst in eight pieces on eight goroutines.
func eightWayCopy(dst, src []byte, move func(dst, src []byte) int) {
	var wg sync.WaitGroup
	n := (len(src)/8 + 4095) / 4096 * 4096
	for lo := 0; lo < len(src); lo += n {
		hi := min(lo+n, len(src))
		wg.Add(1)
		go func() { defer wg.Done(); move(dst[lo:hi], src[lo:hi]) }()
	}
	wg.Wait()
}

// BenchmarkHostSliceFloor times the pieces a call on float32 host slices
// cannot do without, each alone and host-timed (the median of the loop's
// calls, in µs): a synchronous DMA of its inputs from page-locked memory
// to the device and of its output back, and a memmove of its inputs from
// Go memory into page-locked memory on one goroutine, and that memmove
// followed by the DMA up (the DMA then reads lines the CPU has just
// written), the same with non-temporal stores (ntcopy), and both on
// eight goroutines. At the mission
// shape (B2 H8 S256 D64) the inputs are 3 MB and the output 1 MB; at B1
// Hq32 Hkv8 S4096 D128, 32 MB and 16 MB. sdpa's BenchmarkHostSlicesCUDA
// times the whole call.
func BenchmarkHostSliceFloor(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name     string
		up, down int
	}{{"mission", 3 << 20, 1 << 20}, {"B1-Hq32-Hkv8-S4096-D128", 32 << 20, 16 << 20}} {
		pinned, err := hostAlloc(c.up)
		if err != nil {
			b.Fatal(err)
		}
		src := make([]byte, c.up)
		var dev cu.DevicePtr
		if err := d.do(func() (err error) { dev, err = cu.MemAlloc(int64(c.up)); return err }); err != nil {
			b.Fatal(err)
		}
		for _, step := range []struct {
			name string
			run  func() error
		}{
			{fmt.Sprintf("dma-up-%dMB", c.up>>20), func() error {
				return cu.MemcpyHtoD(dev, unsafe.Pointer(&pinned[0]), int64(c.up))
			}},
			{fmt.Sprintf("dma-down-%dMB", c.down>>20), func() error {
				return cu.MemcpyDtoH(unsafe.Pointer(&pinned[0]), dev, int64(c.down))
			}},
			{fmt.Sprintf("memmove-%dMB", c.up>>20), func() error { copy(pinned, src); return nil }},
			{fmt.Sprintf("memmove-then-dma-up-%dMB", c.up>>20), func() error {
				copy(pinned, src)
				return cu.MemcpyHtoD(dev, unsafe.Pointer(&pinned[0]), int64(c.up))
			}},
			{fmt.Sprintf("ntcopy-%dMB", c.up>>20), func() error { ntcopy.Copy(pinned, src); return nil }},
			{fmt.Sprintf("ntcopy-then-dma-up-%dMB", c.up>>20), func() error {
				ntcopy.Copy(pinned, src)
				return cu.MemcpyHtoD(dev, unsafe.Pointer(&pinned[0]), int64(c.up))
			}},
			{fmt.Sprintf("memmove8-then-dma-up-%dMB", c.up>>20), func() error {
				eightWayCopy(pinned, src, func(d, s []byte) int { return copy(d, s) })
				return cu.MemcpyHtoD(dev, unsafe.Pointer(&pinned[0]), int64(c.up))
			}},
			{fmt.Sprintf("ntcopy8-then-dma-up-%dMB", c.up>>20), func() error {
				eightWayCopy(pinned, src, ntcopy.Copy)
				return cu.MemcpyHtoD(dev, unsafe.Pointer(&pinned[0]), int64(c.up))
			}},
			{"async-api-512KB", func() error {
				return cu.MemcpyHtoDAsync(dev, unsafe.Pointer(&pinned[0]), 512<<10, d.stream)
			}},
			{"async-api-4KB", func() error {
				return cu.MemcpyHtoDAsync(dev, unsafe.Pointer(&pinned[0]), 4<<10, d.stream)
			}},
			{fmt.Sprintf("async-6-chunks-then-sync-%dMB", c.up>>20), func() error {
				n := c.up / 6
				for i := range 6 {
					if err := cu.MemcpyHtoDAsync(dev+cu.DevicePtr(i*n), unsafe.Pointer(&pinned[i*n]), int64(n), d.stream); err != nil {
						return err
					}
				}
				return d.stream.Synchronize()
			}},
		} {
			b.Run(c.name+"/"+step.name, func(b *testing.B) { hostTimedDo(b, d, step.run) })
		}
		if err := d.do(func() error { return cu.MemFree(dev) }); err != nil {
			b.Fatal(err)
		}
		if err := hostFree(pinned); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStagedUpload times the device's staged upload (Device.Upload,
// KVCache.Append from host memory: a memmove into page-locked memory on
// par.Default's helpers, then the copies up) of 1 MB and 3 MB from Go
// memory, and the wait for it, host-timed (the median of the loop's
// calls, in µs): the page-locked memory written by memmove ("memmove")
// and with non-temporal stores ("streamed"), whatever streamMax says.
func BenchmarkStagedUpload(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	for _, n := range []int{1 << 20, 3 << 20} {
		src := make([]byte, n)
		var dev cu.DevicePtr
		if err := d.do(func() (err error) { dev, err = cu.MemAlloc(int64(n)); return err }); err != nil {
			b.Fatal(err)
		}
		for _, w := range []struct {
			name      string
			streamMax int
		}{{"memmove", 0}, {"streamed", math.MaxInt}} {
			b.Run(fmt.Sprintf("%dMB/%s", n>>20, w.name), func(b *testing.B) {
				defer func(old int) { streamMax = old }(streamMax)
				streamMax = w.streamMax
				hostTimedDo(b, d, func() error {
					if err := d.upload([]hostCopy{{dev: dev, host: src}}); err != nil {
						return err
					}
					return d.stream.Synchronize()
				})
			})
		}
		if err := d.do(func() error { return cu.MemFree(dev) }); err != nil {
			b.Fatal(err)
		}
	}
}

// hostTimedDo reports the median host time of run inside d.do over the
// benchmark's loop, in µs.
func hostTimedDo(b *testing.B, d *device, run func() error) {
	var times []float64
	for b.Loop() {
		start := time.Now()
		if err := d.do(run); err != nil {
			b.Fatal(err)
		}
		times = append(times, float64(time.Since(start).Nanoseconds())/1e3)
	}
	b.ReportMetric(median(times), "us/op")
}

// BenchmarkMappedOutput times, at the mission shape on FP8 device inputs,
// the attention followed by its output's way to page-locked host memory,
// host-timed (launch, then wait; the median of the loop's calls, in µs):
// the output written to device memory ("device", no copy), then copied
// down in one DMA ("device-then-dma"), and written by the kernel straight
// into page-locked memory through its unified address ("mapped").
func BenchmarkMappedOutput(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	if d.hopperErr != nil {
		b.Skip(d.hopperErr)
	}
	s := sdpatest.NamedShapes["mission"]
	in := sdpatest.RandomInputs(rand.New(rand.NewPCG(sdpatest.Seed(), 91)), s, 1)
	bufs, free := deviceInputs(b, d, s, backend.BHSD, in)
	defer free()
	n := 4 * s.B * s.Hq * s.Sq * s.D
	pinned, err := hostAlloc(n)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := hostFree(pinned); err != nil {
			b.Fatal(err)
		}
	}()
	p := &backend.Problem{Shape: s, Scale: 0.125}
	dev, err := d.newResident(p, bufs, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Free()
	mapped := &buffer{dev: d, buf: pooled{cu.DevicePtr(uintptr(unsafe.Pointer(&pinned[0]))), int64(n)}, n: int64(n)}
	host, err := d.newResident(p, bufs, mapped, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer host.Free()
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"device", func() error { return errors.Join(dev.launch(tiles.HopperStage), d.stream.Synchronize()) }},
		{"device-then-dma", func() error {
			return errors.Join(dev.launch(tiles.HopperStage),
				cu.MemcpyDtoHAsync(unsafe.Pointer(&pinned[0]), cu.DevicePtr(dev.params.Out), int64(n), d.stream), d.stream.Synchronize())
		}},
		{"mapped", func() error { return errors.Join(host.launch(tiles.HopperStage), d.stream.Synchronize()) }},
	} {
		b.Run(c.name, func(b *testing.B) { hostTimedDo(b, d, c.run) })
	}
}
