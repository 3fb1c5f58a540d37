// Package par runs fork-join work on pools of helper goroutines that keep
// polling for the next job for a while after each one before they park, as
// OpenMP runtimes do with their block time. Waking parked goroutines brings
// helpers up one after another (on a virtual machine each wake-up can cost
// tens of microseconds), which for short jobs costs more than the job: with
// polling, jobs issued back to back, or a few phases of one call, start on
// every helper at once.
//
// One pool serves the whole process (Default): the cpu backend's calls, the
// sdpa quantization and the cuda backend's host copies all run on it, so
// that polling helpers of one never crowd out those of another.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fp8attn/fp8attn/internal/freelist"
)

// Job is work shared by the goroutines that join it: Work(w) runs once on
// each, w = 0 on the goroutine that called Run and 1, 2, ... on the helpers
// in the order they join. The job divides its work among them itself (an
// atomic counter of items, say); Run returns when every Work has returned.
type Job interface {
	Work(w int)
}

// Yielding is a Job whose Works wait inside (yielding their threads to
// runtime.Gosched, or blocking in calls into C) when it reports true: the
// time its threads spend off their cores then says nothing of other work
// on them, so its Runs are not used to judge whether the pool's cores are
// shared (run.work).
type Yielding interface {
	Yields() bool
}

// LeadSpinner is a Job whose calling goroutine spins without yielding
// while it waits for the helpers at the end of a Run, when it reports
// true: one on a locked OS thread (a device's), where a yield hands the
// thread's P away and getting one back takes tens of microseconds. The
// wait is as short as the helpers' last Works, which such a job keeps
// short.
type LeadSpinner interface {
	LeadSpins() bool
}

// DefaultSpin is how long an idle helper of Default polls for the next job
// before it parks.
const DefaultSpin = 200 * time.Microsecond

// Default is the process-wide pool: GOMAXPROCS-1 helpers (as at first use),
// polling for DefaultSpin.
var Default = NewPool(0, DefaultSpin)

// Pool is a set of helper goroutines, started at its first Run.
type Pool struct {
	size  int
	spin  time.Duration
	start sync.Once
	jobs  chan *run // hands a run to parked helpers
	// posted offers the open helper slots of the run in progress to
	// helpers still polling after their last job.
	posted atomic.Pointer[run]
	runs   freelist.List[run] // not a sync.Pool: no allocation under the race detector either
	// shared is the time (time.Now().UnixNano()) until which the pool
	// takes its threads' cores to be shared with other work (shareCheck)
	// and neither polls nor lets its helpers poll.
	shared atomic.Int64
	runsN  atomic.Int64 // Runs so far: one in shareEvery is checked
	wakes  atomic.Int64 // helpers handed a run while parked
	// polling counts the helpers polling for a run (in await): Run hands
	// parked helpers only the slots these cannot take.
	polling atomic.Int64
}

// NewPool returns a pool of helpers goroutines (<= 0: GOMAXPROCS-1 at first
// use) that poll for spin after each job before they park (spin <= 0: park
// at once).
func NewPool(helpers int, spin time.Duration) *Pool {
	return &Pool{size: helpers, spin: spin}
}

// Helpers returns the number of helper goroutines (starting them if they
// are not yet).
func (p *Pool) Helpers() int {
	p.start.Do(p.startHelpers)
	return p.size
}

// run is one Run in progress.
type run struct {
	job     Job
	joined  atomic.Int64
	slots   atomic.Int64   // helper slots still open
	pending atomic.Int64   // helpers that joined or may still join and have not finished
	check   bool           // whether work checks its threads' share of their cores
	done    sync.WaitGroup // the same count, to block on
}

// claim takes one of r's open helper slots, if any.
func (r *run) claim() bool {
	for {
		n := r.slots.Load()
		if n <= 0 {
			return false
		}
		if r.slots.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// work runs the job's Work for participant w, and where the thread got
// clearly less of its core than the time Work took (threadCPU: it was
// descheduled for other threads), marks the pool's cores shared for a
// while (sharedFor). Polling then takes time from the very threads that
// do the work: those of other processes, or this job's other
// participants where they share a core.
func (r *run) work(p *Pool, w int) {
	if !r.check {
		r.job.Work(w)
		return
	}
	// threadCPU reads the calling thread's clock: the goroutine must not
	// move to another thread while Work runs (it may block, or be
	// preempted), or the difference would mix two threads' times.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, cpu0 := time.Now(), threadCPU()
	r.job.Work(w)
	if cpu0 < 0 {
		return
	}
	wall := time.Since(start)
	if wall > shareCheck && time.Duration(threadCPU()-cpu0) < wall*9/10 {
		p.shared.Store(time.Now().Add(sharedFor).UnixNano())
	}
}

// One Run in shareEvery is checked (two system calls a participant); a
// Work of at least shareCheck tells whether its thread had its core to
// itself; one that did not stops the pool's polling for sharedFor.
const (
	shareEvery = 8
	shareCheck = 200 * time.Microsecond
	sharedFor  = 100 * time.Millisecond
)

// polls says whether the pool's threads poll now: it has a spin time and
// its cores are not marked shared.
func (p *Pool) polls() bool {
	return p.spin > 0 && time.Now().UnixNano() >= p.shared.Load()
}

func (p *Pool) startHelpers() {
	if p.size <= 0 {
		p.size = runtime.GOMAXPROCS(0) - 1
	}
	p.jobs = make(chan *run)
	for range p.size {
		go func() {
			for r := range p.jobs {
				for r != nil {
					r.work(p, int(r.joined.Add(1)))
					r.pending.Add(-1)
					r.done.Done()
					r = p.await()
				}
			}
		}()
	}
}

// await polls for up to the pool's spin time for a posted run with an open
// helper slot and returns it with the slot taken, or nil.
func (p *Pool) await() *run {
	if !p.polls() {
		return nil
	}
	p.polling.Add(1)
	defer p.polling.Add(-1)
	deadline := time.Now().Add(p.spin)
	for i := 1; ; i++ {
		if r := p.posted.Load(); r != nil && r.claim() {
			return r
		}
		Pause()
		if i%256 == 0 {
			if time.Now().After(deadline) {
				return nil
			}
			if i%512 == 0 { // (a round is mostly its Pause: about 40 ns on recent x86)
				runtime.Gosched() // let an oversubscribed P's goroutines run
			}
		}
	}
}

// Run runs job on the calling goroutine and on up to helpers helpers of p
// (fewer if p has fewer, or if they are busy: a slot no helper takes by the
// time the calling goroutine's Work returns is withdrawn), and returns when
// every Work has returned. Runs may be issued from several goroutines at
// once; each gets the helpers the others leave. It allocates nothing once
// warm.
func (p *Pool) Run(helpers int, job Job) {
	helpers = min(helpers, p.Helpers())
	if helpers <= 0 {
		job.Work(0)
		return
	}
	r := p.runs.Get()
	r.job = job
	r.check = false
	if y, ok := job.(Yielding); !ok || !y.Yields() {
		r.check = p.spin > 0 && p.runsN.Add(1)%shareEvery == 0
	}
	r.joined.Store(0)
	r.pending.Store(int64(helpers))
	r.done.Add(helpers)
	r.slots.Store(int64(helpers))
	// The polling helpers see only the latest posted run. Where this one
	// displaced another still in flight (whose remaining slots those may
	// be claiming), it hands its slots to parked helpers; otherwise it
	// leaves the polling helpers the slots they can take, since a parked
	// helper can take tens of microseconds to wake. (Only a run's own
	// caller hands its slots over, before its Work: a slot handed back
	// after the caller withdrew the open ones would never be taken.)
	prev := p.posted.Swap(r)
	p.handParked(r, prev == nil)
	r.work(p, 0)
	n := r.slots.Swap(0)
	r.pending.Add(-n)
	r.done.Add(-int(n))
	// Wait for the helpers that joined by polling for up to the spin time
	// (yielding now and then, unless the job's lead spins), then by
	// blocking: a goroutine woken from a wait can take tens of
	// microseconds to run again while polling helpers hold every P.
	spins := false
	if s, ok := job.(LeadSpinner); ok {
		spins = s.LeadSpins()
	}
	deadline := time.Now().Add(p.spin)
	for i := 1; r.pending.Load() > 0 && p.polls(); i++ {
		Pause()
		if i%64 == 0 {
			if time.Now().After(deadline) {
				break
			}
			if !spins {
				runtime.Gosched()
			}
		}
	}
	r.done.Wait()
	p.posted.CompareAndSwap(r, nil)
	r.job = nil
	p.runs.Put(r)
}

// handParked hands r's open slots, one each, to parked helpers while some
// are waiting; with pollersFirst, only while the open slots outnumber the
// helpers still polling. (A polling helper may give up before it claims
// its slot: the slot is withdrawn when the calling goroutine's Work
// returns.) Only r's calling goroutine calls it, before its Work.
func (p *Pool) handParked(r *run, pollersFirst bool) {
	for (!pollersFirst || r.slots.Load() > p.polling.Load()) && r.claim() {
		select {
		case p.jobs <- r:
			p.wakes.Add(1)
			continue
		default:
			r.slots.Add(1)
		}
		return
	}
}

// Wakes returns how many times the pool has handed a run to a parked
// helper (each a wake-up of a goroutine that had stopped polling): a
// diagnostic for benchmarks.
func (p *Pool) Wakes() int64 { return p.wakes.Load() }

// For calls fn(i) for every i in [0, n) on the calling goroutine and up to
// helpers helpers of p, each taking the next i in turn, and returns when all
// have returned.
func (p *Pool) For(n, helpers int, fn func(i int)) {
	f := forJob{fn: fn, n: int64(n)}
	p.Run(min(helpers, n-1), &f)
}

type forJob struct {
	fn   func(i int)
	n    int64
	next atomic.Int64
}

func (f *forJob) Work(int) {
	for i := f.next.Add(1) - 1; i < f.n; i = f.next.Add(1) - 1 {
		f.fn(int(i))
	}
}
