//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// timedEngine is a call's engine on host slices with a timeline: it
// records a timing event on the stream after each copy it queues, and
// one before the first copy down (where the kernels have run), with the
// host time of each of those calls; and the host time at which each
// poll of a slot first finds its copies done.
type timedEngine struct {
	*streamEngine
	mu     sync.Mutex
	t0     time.Time
	marks  []timedMark
	events []cu.Event // reused across calls, one a mark
	down   bool
}

// timedMark is one point of a call's timeline: what happened, its bytes,
// the host time (µs after the call began) and, for the points on the
// stream, its event.
type timedMark struct {
	what   string
	bytes  int
	host   float64
	device bool
}

func (t *timedEngine) mark(what string, n int, device bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := timedMark{what: what, bytes: n, host: float64(time.Since(t.t0).Nanoseconds()) / 1e3, device: device}
	if device {
		i := len(t.marks)
		for len(t.events) <= i {
			ev, err := cu.MakeEvent(cu.DefaultEvent)
			if err != nil {
				return err
			}
			t.events = append(t.events, ev)
		}
		if err := t.bind(); err != nil {
			return err
		}
		defer runtime.UnlockOSThread()
		if err := t.events[i].Record(t.d.stream); err != nil {
			return err
		}
	}
	t.marks = append(t.marks, m)
	return nil
}

func (t *timedEngine) toDevice(off int, src []byte) error {
	t.mu.Lock()
	first := len(t.marks) == 0
	t.mu.Unlock()
	if first {
		if err := t.mark("start", 0, true); err != nil {
			return err
		}
	}
	if err := t.streamEngine.toDevice(off, src); err != nil {
		return err
	}
	return t.mark("up", len(src), true)
}

func (t *timedEngine) toHost(dst []byte, off int) error {
	t.mu.Lock()
	first := !t.down
	t.down = true
	t.mu.Unlock()
	if first {
		if err := t.mark("kernels", 0, true); err != nil {
			return err
		}
	}
	if err := t.streamEngine.toHost(dst, off); err != nil {
		return err
	}
	return t.mark("down", len(dst), true)
}

// phase implements phaser: a host point of the timeline.
func (t *timedEngine) phase(what string) { t.mark(what, 0, false) }

func (t *timedEngine) done(slot int) (bool, error) {
	ok, err := t.streamEngine.done(slot)
	if ok && err == nil {
		err = t.mark("polled done", 0, false)
	}
	return ok, err
}

// BenchmarkHostSliceTimeline: where the time of a call on float32 host
// slices goes, on both sides. At the mission shape (and B1 Hq32 Hkv8
// S4096 D128), each call's copies are timed on the device (events after
// each queued copy, and before the first copy down, relative to one
// before the first copy up) and on the host (each queue call and each
// poll that finds a slot's copies done, and the launch's start and end,
// relative to the call's start); the log has, for each point of the
// timeline, the medians over the calls: host µs, device µs (the copies
// and the kernels' end in stream order, then the host's points in the
// order they came). Each shape runs twice: the scales computed by the
// backend ("scales-computed", sdpa's call) and given with the inputs
// ("scales-given").
func BenchmarkHostSliceTimeline(b *testing.B) {
	d, err := openDevice(0)
	if err != nil {
		b.Skip(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name string
		s    backend.Shape
	}{
		{"mission", sdpatest.NamedShapes["mission"]},
		{"B1-Hq32-Hkv8-S4096-D128", backend.Shape{B: 1, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128}},
	} {
		in := sdpatest.RandomInputs(rng, c.s, 1)
		p, _, _ := hostProblem(c.s, in, float32(1/math.Sqrt(float64(c.s.D))), backend.NoMask, backend.BHSD, false)
		te := &timedEngine{}
		be := &kernelBackend{name: "cuda", hostEngine: func(e hostEngine) hostEngine {
			te.streamEngine = e.(*streamEngine)
			return te
		}}
		for _, w := range []struct {
			name string
			p    *backend.Problem
		}{{"scales-computed", p}, {"scales-given", encoded(p)}} {
			b.Run(c.name+"/"+w.name, func(b *testing.B) {
				p := w.p
				var calls [][]timedMark
				var device [][]float64
				var total []float64
				for b.Loop() {
					te.marks, te.down = te.marks[:0], false
					te.t0 = time.Now()
					if err := be.Attention(p); err != nil {
						b.Fatal(err)
					}
					total = append(total, float64(time.Since(te.t0).Nanoseconds())/1e3)
					dev := make([]float64, len(te.marks))
					err := d.do(func() error {
						first := -1
						for i, m := range te.marks {
							if m.device {
								if first < 0 {
									first = i
								}
								ms, err := te.events[first].Elapsed(te.events[i])
								if err != nil {
									return err
								}
								dev[i] = float64(ms) * 1e3
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					calls = append(calls, slices.Clone(te.marks))
					device = append(device, dev)
				}
				b.ReportMetric(median(total), "us/call")
				b.Logf("%s: %d calls, median %.1f µs a call; medians over the calls of each point, the copies (and the kernels' end) in stream order, then the polls that found a slot done:", c.name, len(total), median(total))
				for _, onStream := range []bool{true, false} {
					var h, dv [][]float64
					var kinds []timedMark
					for j, cm := range calls {
						k := 0
						for i, m := range cm {
							if m.device != onStream {
								continue
							}
							if k == len(h) {
								h, dv, kinds = append(h, nil), append(dv, nil), append(kinds, m)
							}
							h[k], dv[k] = append(h[k], m.host), append(dv[k], device[j][i])
							k++
						}
					}
					for k, m := range kinds {
						if onStream {
							b.Logf("%3d %-12s %8d B  host %8.1f µs  device %8.1f µs  (%d calls)", k, m.what, m.bytes, median(h[k]), median(dv[k]), len(h[k]))
						} else {
							b.Logf("%3d %-12s %8s    host %8.1f µs  (%d calls)", k, m.what, "", median(h[k]), len(h[k]))
						}
					}
				}
			})
		}
		d.do(func() error {
			for i := range te.events {
				cu.DestroyEvent(&te.events[i])
			}
			return nil
		})
	}
}
