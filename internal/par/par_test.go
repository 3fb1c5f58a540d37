package par

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	if a := testing.AllocsPerRun(100, func() { Default.Run(2, &c) }); a != 0 {
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

// detachJob is a Detacher whose helpers sleep for slow before they return
// and whose caller's Work returns at once.
type detachJob struct {
	slow              time.Duration
	detach            bool
	helpers, released atomic.Int32
	helpersAtRelease  atomic.Int32
}

func (j *detachJob) Work(w int) {
	if w > 0 {
		time.Sleep(j.slow)
		j.helpers.Add(1)
	}
}

func (j *detachJob) Detach() bool { return j.detach }

func (j *detachJob) Release() {
	j.helpersAtRelease.Store(j.helpers.Load())
	j.released.Add(1)
}

// TestDetach: a Detacher whose Detach says so returns before its slow
// helpers, and Release runs once, after every helper that joined has
// returned; one whose Detach says no waits for them and is not released.
// Runs issued meanwhile get the helpers' run state afresh (no run is
// handed back while a helper still holds it).
func TestDetach(t *testing.T) {
	const slow = 20 * time.Millisecond
	for _, c := range []struct {
		name    string
		detach  bool
		helpers int
	}{{"detached", true, 2}, {"waits", false, 2}, {"detached-one", true, 1}} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPool(2, 0)
			p.Helpers()
			time.Sleep(time.Millisecond) // helpers parked
			j := &detachJob{slow: slow, detach: c.detach}
			start := time.Now()
			p.Run(c.helpers, j)
			took := time.Since(start)
			joined := j.helpers.Load()
			for range 20 {
				p.Run(c.helpers, &countJob{})
			}
			deadline := time.Now().Add(5 * time.Second)
			for j.released.Load() == 0 && c.detach && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(2 * slow)
			switch {
			case c.detach && j.released.Load() != 1:
				t.Errorf("released %d times, want 1", j.released.Load())
			case c.detach && j.helpersAtRelease.Load() != j.helpers.Load():
				t.Errorf("released with %d of %d helpers returned", j.helpersAtRelease.Load(), j.helpers.Load())
			case !c.detach && j.released.Load() != 0:
				t.Errorf("a job that did not detach was released")
			case !c.detach && joined != j.helpers.Load():
				t.Errorf("Run returned with %d of %d helpers returned", joined, j.helpers.Load())
			case j.helpers.Load() == 0:
				t.Errorf("no helper joined")
			case c.detach && took >= slow:
				t.Errorf("a detached Run took %v, its helpers %v", took, slow)
			}
		})
	}
}

// TestDetachCatchesMutants: the pool broken on purpose fails TestDetach
// (FP8ATTN_MUTANTS=1).
func TestDetachCatchesMutants(t *testing.T) {
	const pkg, file = "./internal/par", "internal/par/par.go"
	tests := []string{"TestDetach"}
	mutant.Run(t, []mutant.Mutant{
		{Name: "a detached job never released", File: file, Pkg: pkg,
			Old: "\t\tr.detached = true\n", New: "", Tests: tests},
		{Name: "a detacher's Run waits all the same", File: file, Pkg: pkg,
			Old: "\t\tr.leave(p, 1)\n\t\treturn\n", New: "\t\tr.done.Wait()\n\t\tr.leave(p, 1)\n\t\treturn\n", Tests: tests},
	})
}
