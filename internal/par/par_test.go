package par

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/internal/allocs"
	"github.com/fp8attn/fp8attn/internal/mutant"
)

// TestForEachIndexOnce: every index runs exactly once, for sizes around the
// helper counts, from several goroutines at once, on pools that poll and
// pools that park at once.
func TestForEachIndexOnce(t *testing.T) {
	for _, pool := range []*Pool{Default, NewPool(3, 0), NewPool(2, time.Millisecond)} {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range 70 {
					counts := make([]atomic.Int32, n)
					pool.For(n, g*3+n%5, func(i int) { counts[i].Add(1) })
					for i := range counts {
						if c := counts[i].Load(); c != 1 {
							t.Errorf("n=%d: index %d ran %d times", n, i, c)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}

// countJob records which participants joined a run.
type countJob struct {
	works atomic.Int32
	maxW  atomic.Int32
}

func (c *countJob) Work(w int) {
	c.works.Add(1)
	for {
		m := c.maxW.Load()
		if int32(w) <= m || c.maxW.CompareAndSwap(m, int32(w)) {
			break
		}
	}
}

// TestRunParticipants: Work runs on the caller (w = 0) and on at most the
// asked-for helpers, with distinct indexes below their count.
func TestRunParticipants(t *testing.T) {
	p := NewPool(4, 50*time.Microsecond)
	for _, helpers := range []int{-1, 0, 1, 3, 4, 10} {
		for range 50 {
			var c countJob
			p.Run(helpers, &c)
			n := c.works.Load()
			if want := min(max(helpers, 0), 4) + 1; n < 1 || n > int32(want) {
				t.Fatalf("helpers=%d: Work ran %d times, want 1..%d", helpers, n, want)
			}
			if c.maxW.Load() != n-1 {
				t.Fatalf("helpers=%d: %d participants with largest index %d", helpers, n, c.maxW.Load())
			}
		}
	}
}

// TestRunNoAllocs: a warm Run of a reused job allocates nothing.
func TestRunNoAllocs(t *testing.T) {
	var c countJob
	Default.Run(2, &c)
	if a := allocs.PerCall(100, func() { Default.Run(2, &c) }); a != 0 {
		t.Fatalf("%v allocations per Run", a)
	}
}

// sleepJob's Work sleeps: its thread gets none of the wall time.
type sleepJob struct{ d time.Duration }

func (j sleepJob) Work(int) { time.Sleep(j.d) }

// TestSharedStopsPolling: where a checked Work's thread gets clearly less
// CPU time than the Work takes (here it sleeps), the pool stops polling
// for a while. (That a busy thread keeps polling cannot be asserted: on a
// loaded machine it is descheduled too, and then stopping is right.)
func TestSharedStopsPolling(t *testing.T) {
	if threadCPU() < 0 {
		t.Skip("no per-thread CPU time on this system")
	}
	p := NewPool(1, time.Millisecond)
	if !p.polls() {
		t.Fatalf("a new pool with a spin time does not poll")
	}
	for range shareEvery {
		p.Run(1, sleepJob{2 * shareCheck})
	}
	if p.polls() {
		t.Errorf("a pool whose Works sleep (their threads descheduled) still polls")
	}
}

// yieldingSleepJob sleeps in its Works, as sleepJob, and says it yields.
type yieldingSleepJob struct{ sleepJob }

func (yieldingSleepJob) Yields() bool { return true }

// TestYieldingKeepsPolling: the Runs of a Job that yields in its Works
// (Yielding) do not mark the pool's cores shared, however long its threads
// are off their cores.
func TestYieldingKeepsPolling(t *testing.T) {
	if threadCPU() < 0 {
		t.Skip("no per-thread CPU time on this system")
	}
	p := NewPool(1, time.Millisecond)
	for range 2 * shareEvery {
		p.Run(1, yieldingSleepJob{sleepJob{2 * shareCheck}})
	}
	if !p.polls() {
		t.Errorf("a pool whose yielding Works sleep stopped polling")
	}
}

// goid returns the calling goroutine's id, from its stack's header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	return f[1]
}

// callerJob records the goroutine that ran Work(0), and makes the helpers
// join first where they can (the caller's Work waits a little).
type callerJob struct {
	w0 atomic.Value
}

func (j *callerJob) Work(w int) {
	if w == 0 {
		j.w0.Store(goid())
		time.Sleep(100 * time.Microsecond)
	}
}

// TestCallerIsZero: Work(0) runs on the goroutine that called Run, even
// where a polling helper joins before the caller's Work starts.
func TestCallerIsZero(t *testing.T) {
	for _, p := range []*Pool{NewPool(2, time.Millisecond), NewPool(2, 0)} {
		me := goid()
		for i := range 200 {
			var j callerJob
			p.Run(2, &j)
			if got, _ := j.w0.Load().(string); got != me {
				t.Fatalf("run %d: Work(0) ran on goroutine %s, the caller is %s", i, got, me)
			}
		}
	}
}

// TestPollersFirst: a Run leaves its helper slots to the helpers still
// polling where they are enough, and wakes no parked one (a parked helper
// can take tens of microseconds to start); the polling helpers count
// themselves out when they park. Two helpers join a first Run and then
// poll; the pool's other two stay parked; the second Run of two helpers
// must not wake them; after the spin time every helper parks and counts
// itself out.
//
// The polling helpers give up after the spin time, so an attempt whose
// thread was descheduled for part of it (a busy machine) proves nothing:
// only an attempt that went from the count of two to the Run's return in
// a tenth of the spin time counts, and the test tries again until one
// does (failing where no attempt found two helpers polling in 20 s,
// skipping where some did but none ran in time).
func TestPollersFirst(t *testing.T) {
	const spin = 50 * time.Millisecond
	p := NewPool(4, spin)
	var c countJob
	two := false // some attempt found two helpers polling
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			if !two {
				t.Fatalf("%d helpers poll after Runs of two, want 2", p.polling.Load())
			}
			t.Skip("no attempt ran within a tenth of the spin time: the machine is too busy to tell")
		}
		// Exactly two helpers polling and two parked: a Run of two hands
		// its slots to helpers parked on the channel (those started in
		// time); where fewer or more than two then poll, let them all
		// park and try again.
		if p.polling.Load() > 0 {
			time.Sleep(3 * spin) // every helper parks
		}
		p.Run(2, &c)
		for wait := time.Now().Add(spin / 2); p.polling.Load() < 2 && time.Now().Before(wait); {
			time.Sleep(100 * time.Microsecond)
		}
		start := time.Now()
		if p.polling.Load() != 2 {
			continue
		}
		two = true
		w := p.Wakes()
		p.Run(2, &c)
		woke := p.Wakes() - w
		if time.Since(start) > spin/10 {
			continue // the pollers may have parked meanwhile
		}
		if woke != 0 {
			t.Errorf("a Run of two woke %d parked helpers while two were polling", woke)
		}
		break
	}
	// Every helper parks after the spin time and counts itself out then
	// (within a deadline: a descheduled helper parks late).
	for deadline := time.Now().Add(5 * time.Second); p.polling.Load() != 0; time.Sleep(spin) {
		if time.Now().After(deadline) {
			t.Fatalf("%d helpers still count as polling 5 s after their last Run", p.polling.Load())
		}
	}
}

// TestPoolCatchesMutants: the pool broken on purpose fails the test of
// what it breaks (FP8ATTN_MUTANTS=1).
func TestPoolCatchesMutants(t *testing.T) {
	const file, pkg = "internal/par/par.go", "./internal/par"
	mutant.Run(t, []mutant.Mutant{
		// (Taking the next index in join order is caught only where a helper
		// joins first, which a loaded machine rarely lets happen: the last
		// index is caught on every run.)
		{Name: "the caller takes the last index, not 0", File: file, Pkg: pkg,
			Old: "\tr.work(p, 0)\n", New: "\tr.work(p, helpers)\n", Tests: []string{"TestCallerIsZero"}},
		{Name: "the pool never marks its cores shared (it keeps polling where its threads are descheduled)",
			File: file, Pkg: pkg,
			Old: "p.shared.Store(time.Now().Add(sharedFor).UnixNano())", New: "_ = sharedFor",
			Tests: []string{"TestSharedStopsPolling"}},
		{Name: "a yielding job's Runs judge whether the cores are shared",
			File: file, Pkg: pkg,
			Old: "if y, ok := job.(Yielding); !ok || !y.Yields() {", New: "if true {",
			Tests: []string{"TestYieldingKeepsPolling"}},
		{Name: "a Run hands parked helpers slots that polling ones would take",
			File: file, Pkg: pkg,
			Old: "for (!pollersFirst || r.slots.Load() > p.polling.Load()) && r.claim() {", New: "for r.claim() {",
			Tests: []string{"TestPollersFirst"}},
		{Name: "a helper that stops polling still counts as polling",
			File: file, Pkg: pkg,
			Old: "\tdefer p.polling.Add(-1)\n", New: "",
			Tests: []string{"TestPollersFirst"}},
	})
}
