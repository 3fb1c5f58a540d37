package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// ruleKit is what one graph-rule case works on: a device's float32 and FP8
// tensors, a kv cache holding one sequence of 16 tokens, and host data.
type ruleKit struct {
	dev          *sdpa.Device
	q, k, v, out *sdpa.DeviceTensor
	cache        *sdpa.KVCache
	seq          sdpa.SeqID
	host         *sdpa.Tensor // [1][2][16][64], q's shape
	hostQ        *sdpa.QuantizedTensor
	kv           *sdpa.DeviceTensor // one token's keys and values [1][2][1][64]
	graphs       []*sdpa.Graph
}

func newRuleKit(t *testing.T, dev *sdpa.Device, rng *rand.Rand) *ruleKit {
	t.Helper()
	r := &ruleKit{dev: dev, host: randLayout(rng, 1, 2, 16, 64, sdpa.BHSD)}
	r.q, r.k, r.v = upload(t, dev, r.host), upload(t, dev, randLayout(rng, 1, 2, 16, 64, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, 2, 16, 64, sdpa.BHSD))
	var err error
	if r.out, err = dev.NewTensor(1, 2, 16, 64, sdpa.BHSD); err != nil {
		t.Fatal(err)
	}
	if r.hostQ, err = sdpa.Quantize(r.host); err != nil {
		t.Fatal(err)
	}
	if r.cache, err = dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 64, MaxTokens: 256, MaxSeqLen: 128}); err != nil {
		t.Fatal(err)
	}
	if r.seq, err = r.cache.AddSequence(); err != nil {
		t.Fatal(err)
	}
	if err := r.cache.Append([]sdpa.SeqID{r.seq}, r.k, r.v); err != nil {
		t.Fatal(err)
	}
	r.kv = upload(t, dev, randLayout(rng, 1, 2, 1, 64, sdpa.BHSD))
	return r
}

// attend is one FP8 attention on the kit's tensors (a device call a graph
// records).
func (r *ruleKit) attend() error {
	return r.dev.Attention(r.out, nil, r.q, r.k, r.v, &sdpa.Options{Precision: sdpa.FP8E4M3})
}

// decode is one kv-cache attention of the kit's 16 queries.
func (r *ruleKit) decode() error {
	return r.cache.Attention(r.out, nil, r.q, []sdpa.SeqID{r.seq}, &sdpa.Options{Mask: sdpa.CausalLowerRight})
}

// capture captures fn, keeping the graph for close.
func (r *ruleKit) capture(fn func() error) (*sdpa.Graph, error) {
	g, err := r.dev.Capture(fn)
	if g != nil {
		r.graphs = append(r.graphs, g)
	}
	return g, err
}

// close closes the graphs and frees everything: after any case nothing
// stays pinned.
func (r *ruleKit) close() error {
	var errs []error
	for _, g := range r.graphs {
		errs = append(errs, g.Close())
	}
	for _, x := range []*sdpa.DeviceTensor{r.q, r.k, r.v, r.out, r.kv} {
		errs = append(errs, x.Free())
	}
	return errors.Join(append(errs, r.cache.Close())...)
}

// graphRules is the table of what a graph may and may not do, run on every
// device: the outcome (the sentinel the case's result wraps, or nil) must
// be the same on each.
var graphRules = []struct {
	name string
	want error // nil, sdpa.ErrInvalid or sdpa.ErrUnsupported
	run  func(r *ruleKit) error
}{
	{"a graph of attention replays", nil, func(r *ruleKit) error {
		g, err := r.capture(r.attend)
		if err != nil {
			return err
		}
		return g.Replay()
	}},
	{"a graph of a kv-cache attention replays after an append", nil, func(r *ruleKit) error {
		g, err := r.capture(r.decode)
		if err != nil {
			return err
		}
		if err := r.cache.Append([]sdpa.SeqID{r.seq}, r.kv, r.kv); err != nil {
			return err
		}
		return g.Replay()
	}},
	{"Upload inside a capture", sdpa.ErrUnsupported, func(r *ruleKit) error {
		_, err := r.capture(func() error { _, err := r.dev.Upload(r.host); return err })
		return err
	}},
	{"UploadQuantized inside a capture", sdpa.ErrUnsupported, func(r *ruleKit) error {
		_, err := r.capture(func() error { _, err := r.dev.UploadQuantized(r.hostQ); return err })
		return err
	}},
	{"CopyFrom inside a capture", sdpa.ErrUnsupported, func(r *ruleKit) error {
		_, err := r.capture(func() error { return r.q.CopyFrom(r.host) })
		return err
	}},
	{"Download inside a capture", sdpa.ErrUnsupported, func(r *ruleKit) error {
		_, err := r.capture(func() error { return r.out.Download(r.host) })
		return err
	}},
	{"KVCache.Append inside a capture", sdpa.ErrUnsupported, func(r *ruleKit) error {
		_, err := r.capture(func() error { return r.cache.Append([]sdpa.SeqID{r.seq}, r.kv, r.kv) })
		if n, _ := r.cache.Len(r.seq); n != 16 {
			return fmt.Errorf("a refused append left %d tokens, want 16", n)
		}
		return err
	}},
	{"a capture inside a capture", sdpa.ErrInvalid, func(r *ruleKit) error {
		_, err := r.capture(func() error {
			_, err := r.dev.Capture(r.attend)
			return err
		})
		return err
	}},
	{"Replay inside a capture", sdpa.ErrUnsupported, func(r *ruleKit) error {
		g, err := r.capture(r.attend)
		if err != nil {
			return err
		}
		_, err = r.capture(g.Replay)
		return err
	}},
	{"Close of a graph inside a capture, which then still replays", sdpa.ErrUnsupported, func(r *ruleKit) error {
		g, err := r.capture(r.attend)
		if err != nil {
			return err
		}
		_, err = r.capture(g.Close)
		return errors.Join(err, g.Replay())
	}},
	{"Free of a tensor a live graph uses", sdpa.ErrInvalid, func(r *ruleKit) error {
		if _, err := r.capture(r.attend); err != nil {
			return err
		}
		return r.k.Free()
	}},
	{"Free of an output a live graph writes", sdpa.ErrInvalid, func(r *ruleKit) error {
		if _, err := r.capture(r.decode); err != nil {
			return err
		}
		return r.out.Free()
	}},
	{"Free of a tensor after its graph is closed", nil, func(r *ruleKit) error {
		g, err := r.capture(r.attend)
		if err != nil {
			return err
		}
		if err := g.Close(); err != nil {
			return err
		}
		err = r.k.Free()
		r.k, _ = r.dev.NewTensor(1, 2, 16, 64, sdpa.BHSD) // for close
		return err
	}},
	{"Close of a kv cache a live graph reads", sdpa.ErrInvalid, func(r *ruleKit) error {
		if _, err := r.capture(r.decode); err != nil {
			return err
		}
		return r.cache.Close()
	}},
	{"a tensor made and freed inside a capture", nil, func(r *ruleKit) error {
		g, err := r.capture(func() error {
			x, err := r.dev.Quantize(r.q)
			if err != nil {
				return err
			}
			return x.Free()
		})
		if err != nil {
			return err
		}
		return g.Replay()
	}},
	{"Replay after Close", sdpa.ErrInvalid, func(r *ruleKit) error {
		g, err := r.capture(r.attend)
		if err != nil {
			return err
		}
		if err := g.Close(); err != nil {
			return err
		}
		return g.Replay()
	}},
	{"Replay of a kv-cache attention whose sequence was dropped", sdpa.ErrInvalid, func(r *ruleKit) error {
		g, err := r.capture(r.decode)
		if err != nil {
			return err
		}
		if err := r.cache.Drop(r.seq); err != nil {
			return err
		}
		return g.Replay()
	}},
	{"a kv-cache attention of more queries than the sequence holds", sdpa.ErrInvalid, func(r *ruleKit) error {
		s, err := r.cache.AddSequence()
		if err != nil {
			return err
		}
		if err := r.cache.Append([]sdpa.SeqID{s}, r.kv, r.kv); err != nil {
			return err
		}
		_, err = r.capture(func() error {
			return r.cache.Attention(r.out, nil, r.q, []sdpa.SeqID{s}, nil)
		})
		return err
	}},
	{"a failing call inside a capture", sdpa.ErrInvalid, func(r *ruleKit) error {
		_, err := r.capture(func() error { return r.dev.Attention(r.out, nil, r.q, r.k, r.kv, nil) })
		return err
	}},
	{"a capture on a nil device", sdpa.ErrInvalid, func(r *ruleKit) error {
		var d *sdpa.Device
		_, err := d.Capture(r.attend)
		return err
	}},
}

// outcome names the sentinel err wraps.
func outcome(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, sdpa.ErrUnsupported):
		return "ErrUnsupported"
	case errors.Is(err, sdpa.ErrInvalid):
		return "ErrInvalid"
	}
	return "other: " + err.Error()
}

// TestGraphRules runs the graph-rules table on every device (cpu always,
// cuda where this build and machine have it): each case's outcome is the
// one the table wants, so it is the same on each, and after each case
// every tensor frees and the cache closes (nothing stays pinned).
func TestGraphRules(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	got := map[string][]string{}
	devs := graphDevices(t)
	for _, dev := range devs {
		rng := rand.New(rand.NewPCG(sd, 55))
		for _, c := range graphRules {
			r := newRuleKit(t, dev, rng)
			err := c.run(r)
			o := outcome(err)
			got[c.name] = append(got[c.name], o)
			if o != outcome(c.want) {
				t.Errorf("%s: %s: %v, want %s", dev, c.name, err, outcome(c.want))
			}
			if err := r.close(); err != nil {
				t.Errorf("%s: %s: after the case: %v", dev, c.name, err)
			}
		}
	}
	for name, os := range got {
		for _, o := range os[1:] {
			if o != os[0] {
				t.Errorf("%s: outcomes differ between devices %v: %v", name, devs, os)
			}
		}
	}
}

// TestCaptureOtherGoroutineCPU: on the cpu device, calls another goroutine
// makes while a capture is in progress run as usual, host copies included,
// and are not recorded: a replay rewrites the captured call's output only.
// (On "cuda" they wait for the capture to end: TestGraphConcurrentGPU.)
func TestCaptureOtherGoroutineCPU(t *testing.T) {
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 60))
	r := newRuleKit(t, dev, rng)
	out2, err := dev.NewTensor(1, 2, 16, 64, sdpa.BHSD)
	if err != nil {
		t.Fatal(err)
	}
	inside, done := make(chan struct{}), make(chan error)
	go func() {
		<-inside
		x, err := dev.Upload(r.host)
		if err == nil {
			err = errors.Join(dev.Attention(out2, nil, x, r.k, r.v, nil), x.Free())
		}
		done <- err
	}()
	g, err := r.capture(func() error {
		close(inside)
		if err := <-done; err != nil {
			return fmt.Errorf("another goroutine's calls during the capture: %w", err)
		}
		return r.attend()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*sdpa.DeviceTensor{r.out, out2} {
		fill(t, x, nil)
	}
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	if got := download(t, r.out); sameBits(got.Data, download(t, out2).Data) < 0 {
		t.Error("the replay left the captured output poisoned")
	}
	for i, x := range download(t, out2).Data {
		if math.Float32bits(x) != sdpatest.Poison {
			t.Fatalf("the replay wrote element %d of the other goroutine's output", i)
		}
	}
	if err := errors.Join(r.close(), out2.Free()); err != nil {
		t.Fatal(err)
	}
}
