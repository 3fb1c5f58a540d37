//go:build cuda

package cuda

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// BenchmarkStreamFlags measures what the stream memory operations offer a
// pipe between host and device, host-timed medians of the loop's rounds in
// µs: each call's cost on the host (a write, a wait, an asynchronous 208
// KB copy down, an event's record and query); the time from a host store
// that opens a stream's wait to the host seeing the stream's write after
// it (idle, and with a 208 KB copy down between them), and the same with
// the copy's event polled instead of the write; the copy queued and its
// event polled (no wait); and a graph of a round trip's device work (six
// waits each opening a 128 KB copy up and a write, then five 208 KB copies
// down each with a write) captured once: its launch's host cost and the
// time until its last write is seen, every wait opened at once.
func BenchmarkStreamFlags(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	const down, up = 208 << 10, 128 << 10
	rounds := max(b.N, 50)
	b.ResetTimer()
	err = d.do(func() error {
		flagsMem, err := hostAlloc(4096)
		if err != nil {
			return err
		}
		defer hostFree(flagsMem)
		ring, err := hostAlloc(8 << 20)
		if err != nil {
			return err
		}
		defer hostFree(ring)
		words := unsafe.Slice((*uint32)(unsafe.Pointer(&flagsMem[0])), 1024)
		clear(words)
		word := func(i int) *uint32 { return &words[i] }
		flagsDev, err := hostDevicePtr(flagsMem)
		if err != nil {
			return err
		}
		at := func(i int) cu.DevicePtr { return flagsDev + cu.DevicePtr(4*i) }
		dev, err := cu.MemAlloc(8 << 20)
		if err != nil {
			return err
		}
		defer cu.MemFree(dev)
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return err
		}
		defer cu.DestroyEvent(&ev)
		s := d.stream
		us := func(t time.Duration) float64 { return float64(t.Nanoseconds()) / 1e3 }
		report := func(what string, x []float64) {
			slices.Sort(x)
			b.Logf("%-52s median %7.2f µs  (p10 %6.2f, p90 %6.2f; %d rounds)", what, x[len(x)/2], x[len(x)/10], x[len(x)*9/10], len(x))
		}
		spin := func(t time.Duration) {
			for t0 := time.Now(); time.Since(t0) < t; {
			}
		}
		await := func(w *uint32, v uint32) {
			for atomic.LoadUint32(w) != v {
			}
		}
		seq := uint32(0)
		// Host costs.
		var cost [5][]float64
		for range rounds {
			seq++
			t := time.Now()
			if err := streamWrite(s, at(0), seq); err != nil {
				return err
			}
			cost[0] = append(cost[0], us(time.Since(t)))
			t = time.Now()
			if err := streamWait(s, at(0), seq); err != nil {
				return err
			}
			cost[1] = append(cost[1], us(time.Since(t)))
			t = time.Now()
			if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&ring[0]), dev, down, s); err != nil {
				return err
			}
			cost[2] = append(cost[2], us(time.Since(t)))
			t = time.Now()
			if err := ev.Record(s); err != nil {
				return err
			}
			cost[3] = append(cost[3], us(time.Since(t)))
			if err := s.Synchronize(); err != nil {
				return err
			}
			t = time.Now()
			if err := ev.Query(); err != nil {
				return err
			}
			cost[4] = append(cost[4], us(time.Since(t)))
		}
		for i, what := range []string{"cost: stream write", "cost: stream wait", "cost: 208 KB copy down queued", "cost: event record", "cost: event query (done)"} {
			report(what, cost[i])
		}
		// Latencies from a host store that opens a wait.
		for _, c := range []struct {
			what  string
			copy  bool
			event bool
		}{{"open -> write seen (idle)", false, false}, {"open -> 208 KB down -> write seen", true, false}, {"open -> 208 KB down -> event polled", true, true}} {
			var x []float64
			for range rounds {
				seq++
				if err := streamWait(s, at(1), seq); err != nil {
					return err
				}
				if c.copy {
					if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&ring[0]), dev, down, s); err != nil {
						return err
					}
				}
				if c.event {
					if err := ev.Record(s); err != nil {
						return err
					}
				} else if err := streamWrite(s, at(2), seq); err != nil {
					return err
				}
				spin(30 * time.Microsecond)
				t := time.Now()
				atomic.StoreUint32(word(1), seq)
				if c.event {
					for {
						if err := ev.Query(); err == nil {
							break
						} else if err != cu.NotReady {
							return err
						}
					}
				} else {
					await(word(2), seq)
				}
				x = append(x, us(time.Since(t)))
			}
			report(c.what, x)
		}
		var x []float64
		for range rounds {
			t := time.Now()
			if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&ring[0]), dev, down, s); err != nil {
				return err
			}
			if err := ev.Record(s); err != nil {
				return err
			}
			for {
				if err := ev.Query(); err == nil {
					break
				} else if err != cu.NotReady {
					return err
				}
			}
			x = append(x, us(time.Since(t)))
		}
		report("208 KB down queued -> event polled", x)
		// A round trip's device work in a graph. Gates 10-15 open the
		// copies up; 20-25 and 30-34 are the device's writes; 40 the
		// last.
		var g graph
		if err := beginCapture(s, false); err != nil {
			return err
		}
		ierr := func() error {
			for c := range 6 {
				if err := streamWait(s, at(10+c), 1); err != nil {
					return err
				}
				if err := cu.MemcpyHtoDAsync(dev+cu.DevicePtr(c*up), unsafe.Pointer(&ring[c*up]), up, s); err != nil {
					return err
				}
				if err := streamWrite(s, at(20+c), 1); err != nil {
					return err
				}
			}
			for c := range 5 {
				if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&ring[4<<20+c*down]), dev+cu.DevicePtr(c*down), down, s); err != nil {
					return err
				}
				if err := streamWrite(s, at(30+c), 1); err != nil {
					return err
				}
			}
			for c := range 6 {
				if err := streamWrite(s, at(10+c), 0); err != nil {
					return err
				}
			}
			return streamWrite(s, at(40), 1)
		}()
		if err := g.endCapture(s); err != nil || ierr != nil {
			b.Logf("graph of stream waits and writes: capture failed: %v %v", ierr, err)
			return nil
		}
		defer g.destroy()
		var launchCost, whole []float64
		for range rounds {
			for i := range 50 {
				words[i] = 0
			}
			t := time.Now()
			if err := g.launch(s); err != nil {
				return err
			}
			launchCost = append(launchCost, us(time.Since(t)))
			for c := range 6 {
				atomic.StoreUint32(word(10+c), 1)
			}
			await(word(40), 1)
			whole = append(whole, us(time.Since(t)))
			if err := s.Synchronize(); err != nil {
				return err
			}
		}
		report("graph: launch (host cost)", launchCost)
		report("graph: launch -> last write seen (768 KB up, 1 MB down)", whole)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
