//go:build cuda

package cuda

import (
	"cmp"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/par"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// timedEngine is a call's engine on host slices with a timeline: it
// records a timing event on the stream after each copy it queues, and
// one before the first copy down (where the kernels have run), with the
// host time of each of those calls; the host time at which each poll of
// a slot first finds its copies done; the pipe's phases; and the time
// its goroutines spend in each kind of task. Marks go into preallocated
// slots without a lock, so that timing the helpers does not serialize
// them.
type timedEngine struct {
	*streamEngine
	t0      time.Time
	marks   [512]timedMark
	n       atomic.Int64
	events  []cu.Event // one a mark slot, made once
	started bool       // the "start" mark is recorded (the lead only)
	down    bool       // the "kernels" mark is recorded (the lead only)
	tallies map[string]*atomic.Int64
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

// reset readies t for a call.
func (t *timedEngine) reset() {
	t.n.Store(0)
	t.started, t.down = false, false
	if t.tallies == nil {
		t.tallies = map[string]*atomic.Int64{}
		for _, k := range []string{"items", "pieces up", "pieces down"} {
			t.tallies[k] = new(atomic.Int64)
		}
	}
	for _, v := range t.tallies {
		v.Store(0)
	}
	t.t0 = time.Now()
}

// callMarks returns the call's marks.
func (t *timedEngine) callMarks() []timedMark {
	return slices.Clone(t.marks[:min(int(t.n.Load()), len(t.marks))])
}

func (t *timedEngine) mark(what string, n int, device bool) error {
	host := float64(time.Since(t.t0).Nanoseconds()) / 1e3
	i := int(t.n.Add(1) - 1)
	if i >= len(t.marks) {
		return nil
	}
	if device {
		if t.events == nil {
			t.events = make([]cu.Event, len(t.marks))
			for k := range t.events {
				ev, err := cu.MakeEvent(cu.DefaultEvent)
				if err != nil {
					return err
				}
				t.events[k] = ev
			}
		}
		if err := t.bind(); err != nil {
			return err
		}
		defer runtime.UnlockOSThread()
		if err := t.events[i].Record(t.d.stream); err != nil {
			return err
		}
	}
	t.marks[i] = timedMark{what: what, bytes: n, host: host, device: device}
	return nil
}

func (t *timedEngine) toDevice(off int, src []byte) error {
	if !t.started {
		t.started = true
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
	if !t.down {
		t.down = true
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

// tally implements phaser: time spent in a kind of task.
func (t *timedEngine) tally(what string, d time.Duration) {
	if v := t.tallies[what]; v != nil {
		v.Add(int64(d))
	}
}

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
				tallies := map[string][]float64{}
				var wakes []float64
				for b.Loop() {
					te.reset()
					w0 := par.Default.Wakes()
					if err := be.Attention(p); err != nil {
						b.Fatal(err)
					}
					total = append(total, float64(time.Since(te.t0).Nanoseconds())/1e3)
					wakes = append(wakes, float64(par.Default.Wakes()-w0))
					marks := te.callMarks()
					dev := make([]float64, len(marks))
					err := d.do(func() error {
						first := -1
						for i, m := range marks {
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
					calls = append(calls, marks)
					device = append(device, dev)
					for k, v := range te.tallies {
						tallies[k] = append(tallies[k], float64(v.Load())/1e3)
					}
				}
				b.ReportMetric(median(total), "us/call")
				b.Logf("helpers woken from parking: median %.0f a call", median(wakes))
				b.Logf("%s: %d calls, median %.1f µs a call; medians over the calls of each point, the copies (and the kernels' end) in stream order, then the polls that found a slot done:", c.name, len(total), median(total))
				// The stream's points in order; the host's by kind and
				// occurrence (the k-th "joined" of each call), ordered by
				// their medians.
				type point struct {
					what      string
					k, bytes  int
					host, dev []float64
				}
				var stream []*point
				hostPts := map[[2]any]*point{}
				for j, cm := range calls {
					k, seen := 0, map[string]int{}
					for i, m := range cm {
						if m.device {
							if k == len(stream) {
								stream = append(stream, &point{what: m.what, bytes: m.bytes})
							}
							stream[k].host, stream[k].dev = append(stream[k].host, m.host), append(stream[k].dev, device[j][i])
							k++
							continue
						}
						key := [2]any{m.what, seen[m.what]}
						seen[m.what]++
						pt := hostPts[key]
						if pt == nil {
							pt = &point{what: m.what, k: key[1].(int)}
							hostPts[key] = pt
						}
						pt.host = append(pt.host, m.host)
					}
				}
				for k, pt := range stream {
					b.Logf("%3d %-16s %8d B  host %8.1f µs  device %8.1f µs  (%d calls)", k, pt.what, pt.bytes, median(pt.host), median(pt.dev), len(pt.host))
				}
				var hp []*point
				for _, pt := range hostPts {
					hp = append(hp, pt)
				}
				slices.SortFunc(hp, func(a, b *point) int { return cmp.Compare(median(a.host), median(b.host)) })
				for _, pt := range hp {
					b.Logf("    %-16s #%-3d host %8.1f µs  (%d calls)", pt.what, pt.k, median(pt.host), len(pt.host))
				}
				var names []string
				for k := range tallies {
					names = append(names, k)
				}
				slices.Sort(names)
				for _, k := range names {
					b.Logf("    time in %-12s %8.1f µs a call, summed over the goroutines (%d calls)", k, median(tallies[k]), len(tallies[k]))
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
