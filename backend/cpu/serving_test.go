package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cpu"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestServingConfig: a configured backend bounds its goroutines (Workers-1
// helpers), computes what the default backend computes with any spin time,
// and takes concurrent calls (run under -race in CI).
func TestServingConfig(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 51))
	s := sdpatest.NamedShapes["mission"]
	in := sdpatest.RandomInputs(rng, s, 1)
	ref, _, _ := sdpatest.NewProblem(s, in, 0.125, backend.CausalLowerRight, backend.FP8E4M3)
	if err := cpu.New(1).Attention(ref); err != nil {
		t.Fatal(err)
	}
	for i, spin := range []time.Duration{-1, 0, 2 * time.Millisecond} {
		be, err := cpu.NewConfig(fmt.Sprintf("serving-%d", i), cpu.Config{Workers: 3, Spin: spin})
		if err != nil {
			t.Fatal(err)
		}
		before := runtime.NumGoroutine()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, out, _ := sdpatest.NewProblem(s, in, 0.125, backend.CausalLowerRight, backend.FP8E4M3)
				if err := be.Attention(p); err != nil {
					errs <- err
					return
				}
				if err := out.Check("Out"); err != nil {
					errs <- err
					return
				}
				for j := range p.Out {
					if math.Float32bits(p.Out[j]) != math.Float32bits(ref.Out[j]) {
						errs <- fmt.Errorf("spin %v: element %d %g, one worker gave %g", spin, j, p.Out[j], ref.Out[j])
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// The callers' goroutines have signalled Done but may not have
		// exited yet: give them a second.
		extra := runtime.NumGoroutine() - before
		for deadline := time.Now().Add(time.Second); extra > 2 && time.Now().Before(deadline); extra = runtime.NumGoroutine() - before {
			time.Sleep(time.Millisecond)
		}
		if extra > 2 {
			t.Errorf("spin %v: %d goroutines left running, want at most Workers-1 = 2 helpers", spin, extra)
		}
	}
	if _, err := cpu.NewConfig("", cpu.Config{}); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("empty name: %v", err)
	}
	if _, err := cpu.NewConfig("x", cpu.Config{ISA: "sse9"}); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("unknown ISA: %v", err)
	}
}

// TestRegisterErrors: a duplicate name, an empty name and a nil backend are
// errors, not panics.
func TestRegisterErrors(t *testing.T) {
	be, _ := cpu.NewConfig("register-test", cpu.Config{Workers: 1})
	if err := backend.Register(be, -1); err != nil {
		t.Fatal(err)
	}
	if err := backend.Register(be, -1); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("duplicate: %v", err)
	}
	if err := backend.Register(nil, 0); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("nil: %v", err)
	}
}
