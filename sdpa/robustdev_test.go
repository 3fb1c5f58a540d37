package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/internal/allocs"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// devProbe is one bad or unusual call through the device, cache or graph
// API. want is the sentinel its error must wrap, or nil for a documented
// result that ok checks.
type devProbe struct {
	name string
	want error
	run  func() error
	ok   func() bool
}

// devProbes returns the probes over a fresh cpu device: nil and zero-value
// receivers, overflowing and impossible sizes, freed tensors, closed
// caches and graphs, tensors of another device.
func devProbes(t *testing.T, rng *rand.Rand) []devProbe {
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	other, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	host := randLayout(rng, 1, 2, 4, 16, sdpa.BHSD)
	hq, _ := sdpa.Quantize(host)
	live := upload(t, dev, host)
	foreign := upload(t, other, host)
	freed := upload(t, dev, host)
	if err := freed.Free(); err != nil {
		t.Fatal(err)
	}
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 16, MaxTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := cache.AddSequence()
	if err := cache.Append([]sdpa.SeqID{seq}, upload(t, dev, randLayout(rng, 1, 2, 2, 16, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, 2, 2, 16, sdpa.BHSD))); err != nil {
		t.Fatal(err)
	}
	closed, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 16, MaxTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	closedSeq, _ := closed.AddSequence()
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	var nilDev *sdpa.Device
	zeroDev := &sdpa.Device{}
	var nilT *sdpa.DeviceTensor
	zeroT := &sdpa.DeviceTensor{}
	var nilC *sdpa.KVCache
	zeroC := &sdpa.KVCache{}
	var nilG *sdpa.Graph
	ids := []sdpa.SeqID{seq}
	inv, oom, uns := sdpa.ErrInvalid, sdpa.ErrOutOfMemory, sdpa.ErrUnsupported
	cfg := sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 16, MaxTokens: 128}

	ps := []devProbe{}
	add := func(name string, want error, run func() error) {
		ps = append(ps, devProbe{name: name, want: want, run: run})
	}
	doc := func(name string, ok func() bool) { ps = append(ps, devProbe{name: name, ok: ok}) }
	for _, d := range []struct {
		name string
		d    *sdpa.Device
	}{{"nil device", nilDev}, {"zero Device", zeroDev}} {
		add(d.name+" Upload", inv, func() error { _, err := d.d.Upload(host); return err })
		add(d.name+" UploadQuantized", inv, func() error { _, err := d.d.UploadQuantized(hq); return err })
		add(d.name+" NewTensor", inv, func() error { _, err := d.d.NewTensor(1, 1, 1, 1, sdpa.BHSD); return err })
		add(d.name+" Quantize", inv, func() error { _, err := d.d.Quantize(live); return err })
		add(d.name+" Attention", inv, func() error { return d.d.Attention(live, nil, live, live, live, nil) })
		add(d.name+" NewKVCache", inv, func() error { _, err := d.d.NewKVCache(cfg); return err })
		add(d.name+" Capture", inv, func() error { _, err := d.d.Capture(func() error { return nil }); return err })
		add(d.name+" SetMemoryLimit", inv, func() error { return d.d.SetMemoryLimit(1) })
		doc(d.name+" MemoryHeld is 0", func() bool { return d.d.MemoryHeld() == 0 })
		doc(d.name+" Name is empty", func() bool { return d.d.Name() == "" })
	}
	for _, x := range []struct {
		name string
		t    *sdpa.DeviceTensor
	}{{"nil tensor", nilT}, {"zero DeviceTensor", zeroT}, {"freed tensor", freed}, {"other device's tensor", foreign}} {
		if x.t != foreign {
			add(x.name+" CopyFrom", inv, func() error { return x.t.CopyFrom(host) })
			add(x.name+" Download", inv, func() error { return x.t.Download(host) })
		}
		if x.t != nilT { // (a nil LSE asks for none)
			add(x.name+" as an Attention LSE", inv, func() error { return dev.Attention(live, x.t, live, live, live, nil) })
		}
		add(x.name+" as an Attention output", inv, func() error { return dev.Attention(x.t, nil, live, live, live, nil) })
		add(x.name+" as an Attention input", inv, func() error { return dev.Attention(live, nil, live, x.t, live, nil) })
		add(x.name+" Quantize", inv, func() error { _, err := dev.Quantize(x.t); return err })
		add(x.name+" Append", inv, func() error { return cache.Append(ids, x.t, live) })
		add(x.name+" cache Attention", inv, func() error { return cache.Attention(live, nil, x.t, ids, nil) })
		if x.t != foreign {
			doc(x.name+" Dims are zeros", func() bool { b, h, s, d := x.t.Dims(); return b == 0 && h == 0 && s == 0 && d == 0 })
		}
	}
	add("nil tensor Free", inv, nilT.Free)
	add("zero DeviceTensor Free", inv, zeroT.Free)
	doc("closed cache Usage is zeros", func() bool { return closed.Usage() == sdpa.KVCacheUsage{} })
	add("freed tensor Free", inv, freed.Free)
	add("NewTensor [2^20][2^10][2^20][128] (2 EiB)", oom, func() error { _, err := dev.NewTensor(1<<20, 1<<10, 1<<20, 128, sdpa.BHSD); return err })
	for _, sh := range [][4]int{
		{1 << 20, 1 << 10, 1 << 20, 1 << 13}, {math.MaxInt, 2, 1, 1}, {1 << 31, 1 << 31, 4, 1}, {1 << 61, 1, 1, 1},
		{-1, -1, 1, 1}, {0, 1, 1, 1}, {math.MinInt, math.MinInt, 1, 1},
	} {
		add(fmt.Sprintf("NewTensor%v overflowing or not positive", sh), inv, func() error { _, err := dev.NewTensor(sh[0], sh[1], sh[2], sh[3], sdpa.BHSD); return err })
	}
	add("NewTensor of 64 TiB", oom, func() error { _, err := dev.NewTensor(1, 64, 1<<30, 256, sdpa.BHSD); return err })
	add("NewTensor of an unknown layout", inv, func() error { _, err := dev.NewTensor(1, 1, 1, 1, sdpa.Layout(7)); return err })
	add("NewKVCache of 32 TiB", oom, func() error {
		_, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 64, HeadDim: 256, MaxTokens: 1 << 30})
		return err
	})
	for _, c := range []sdpa.KVCacheConfig{
		{KVHeads: 1 << 20, HeadDim: 1 << 20, MaxTokens: math.MaxInt},
		{KVHeads: 1, HeadDim: 1, MaxTokens: math.MaxInt, PageSize: 64},
		{KVHeads: math.MaxInt, HeadDim: 2, MaxTokens: 64},
		{KVHeads: 0, HeadDim: 16, MaxTokens: 64}, {KVHeads: 2, HeadDim: -16, MaxTokens: 64},
		{KVHeads: 2, HeadDim: 16, MaxTokens: 0}, {KVHeads: 2, HeadDim: 16, MaxTokens: 64, PageSize: -64},
		{KVHeads: 2, HeadDim: 16, MaxTokens: 64, MaxSeqLen: 65},
	} {
		add(fmt.Sprintf("NewKVCache%+v", c), inv, func() error { _, err := dev.NewKVCache(c); return err })
	}
	add("NewKVCache of a page size the cpu cannot take", uns, func() error {
		_, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 16, MaxTokens: 128, PageSize: 48})
		return err
	})
	for _, c := range []struct {
		name string
		c    *sdpa.KVCache
	}{{"nil cache", nilC}, {"zero KVCache", zeroC}, {"closed cache", closed}} {
		add(c.name+" AddSequence", inv, func() error { _, err := c.c.AddSequence(); return err })
		add(c.name+" Len", inv, func() error { _, err := c.c.Len(closedSeq); return err })
		add(c.name+" Drop", inv, func() error { return c.c.Drop(closedSeq) })
		add(c.name+" Close", inv, c.c.Close)
		add(c.name+" Append", inv, func() error { return c.c.Append([]sdpa.SeqID{closedSeq}, live, live) })
		add(c.name+" Attention", inv, func() error { return c.c.Attention(live, nil, live, []sdpa.SeqID{closedSeq}, nil) })
		doc(c.name+" Usage holds no tokens", func() bool { return c.c.Usage().Tokens == 0 })
	}
	add("cache Attention of 4 queries on a sequence of 2", inv, func() error { return cache.Attention(live, nil, live, ids, nil) })
	add("cache Attention of no sequences", inv, func() error { return cache.Attention(live, nil, live, nil, nil) })
	add("cache Attention naming a sequence twice", inv, func() error {
		return cache.Attention(live, nil, live, []sdpa.SeqID{seq, seq}, nil)
	})
	add("cache Append of 2^40 tokens' worth", inv, func() error { return cache.Append([]sdpa.SeqID{seq, seq}, live, live) })
	add("nil graph Replay", inv, nilG.Replay)
	doc("nil graph Close is nil", func() bool { return nilG.Close() == nil })
	add("zero Graph Replay", inv, (&sdpa.Graph{}).Replay)
	add("Capture of nil", inv, func() error { _, err := dev.Capture(nil); return err })
	add("SetMemoryLimit(-1) restores the default", nil, func() error { return dev.SetMemoryLimit(-1) })
	return ps
}

// TestDeviceAPINeverPanics drives the probes: every one returns an error
// wrapping its sentinel (or its documented result), never panics, and an
// error says it is sdpa's or names a tensor, cache or device. The counts
// are logged.
func TestDeviceAPINeverPanics(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	var errs, results, panics int
	for _, p := range devProbes(t, rand.New(rand.NewPCG(sd, 56))) {
		func() {
			defer func() {
				if r := recover(); r != nil {
					panics++
					t.Errorf("%s panicked: %v", p.name, r)
				}
			}()
			if p.ok != nil {
				if !p.ok() {
					t.Errorf("%s: not the documented result", p.name)
				}
				results++
				return
			}
			err := p.run()
			if p.want == nil {
				if err != nil {
					t.Errorf("%s: %v", p.name, err)
				}
				results++
				return
			}
			if !errors.Is(err, p.want) {
				t.Errorf("%s: %v, want %v", p.name, err, p.want)
			}
			errs++
		}()
	}
	t.Logf("%d probes: %d errors, %d documented results, %d panics", errs+results+panics, errs, results, panics)
}

// TestErrorsSayWhat: errors about a freed tensor, a closed cache and
// another device's tensor say so, naming the devices apart, and do not
// read as an invalid attention problem.
func TestErrorsSayWhat(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 57))
	a, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	host := randLayout(rng, 1, 1, 1, 16, sdpa.BHSD)
	x, y, z := upload(t, a, host), upload(t, b, host), upload(t, a, host)
	if err := z.Free(); err != nil {
		t.Fatal(err)
	}
	c, err := a.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: 16, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		says []string
	}{
		{"another device's tensor", a.Attention(x, nil, x, y, x, nil), []string{"k belongs to device " + b.String() + ", not " + a.String()}},
		{"a freed tensor", a.Attention(x, nil, x, x, z, nil), []string{"v, a tensor of device " + a.String() + ", was freed"}},
		{"a closed cache", c.Close(), []string{"kv cache", "closed"}},
		{"a tensor freed twice", z.Free(), []string{"freed twice"}},
		{"a bound passed", func() error { _, err := a.NewTensor(1, 64, 1<<30, 256, sdpa.BHSD); return err }(), []string{"NewTensor [1][64][1073741824][256]", "bytes", "bound"}},
	} {
		msg := fmt.Sprint(tc.err)
		for _, s := range tc.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: %q does not say %q", tc.name, msg, s)
			}
		}
		if !strings.HasPrefix(msg, "sdpa: ") || strings.Contains(msg, "attention problem") {
			t.Errorf("%s: %q: want an sdpa error that does not read as an invalid attention problem", tc.name, msg)
		}
	}
	if a.String() == b.String() {
		t.Errorf("two cpu devices both read %q", a)
	}
}

// TestDeviceNoAllocs: on the cpu device, after a warm-up call, Attention on
// float32 and on FP8 device tensors, and the Replay of a graph of them,
// allocate nothing (the capture checks cost no allocation outside a
// capture).
func TestDeviceNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 59))
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	q, k, v := upload(t, dev, randLayout(rng, 1, 4, 32, 64, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, 2, 48, 64, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, 2, 48, 64, sdpa.BHSD))
	q8, _ := dev.Quantize(q)
	k8, _ := dev.Quantize(k)
	v8, _ := dev.Quantize(v)
	out, _ := dev.NewTensor(1, 4, 32, 64, sdpa.BHSD)
	lse, _ := dev.NewTensor(1, 4, 32, 1, sdpa.BHSD)
	fp8 := &sdpa.Options{Precision: sdpa.FP8E4M3}
	steps := []struct {
		name string
		step func() error
	}{
		{"float32", func() error { return dev.Attention(out, lse, q, k, v, nil) }},
		{"float32 quantized", func() error { return dev.Attention(out, lse, q, k, v, fp8) }},
		{"FP8", func() error { return dev.Attention(out, nil, q8, k8, v8, nil) }},
	}
	for _, s := range steps {
		g, err := dev.Capture(s.step)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			call func() error
		}{{s.name, s.step}, {s.name + " replayed", g.Replay}} {
			if err := c.call(); err != nil {
				t.Fatal(err)
			}
			if n := allocs.PerCall(20, func() {
				if err := c.call(); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%s: %v allocations a call", c.name, n)
			}
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLSELayout: Device.Attention and KVCache.Attention take the
// log-sum-exps only into a [B][H][S][1] tensor in layout BHSD (the order
// they write them in); one in BSHD, whose rows lie in another order, is
// an error wrapping ErrInvalid, and a BHSD one works.
func TestLSELayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 58))
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	const b, h, s, d = 1, 2, 3, 16
	q := upload(t, dev, randLayout(rng, b, h, s, d, sdpa.BHSD))
	out, err := dev.NewTensor(b, h, s, d, sdpa.BHSD)
	if err != nil {
		t.Fatal(err)
	}
	c, id := cacheOfOne(t, rng, dev, h, 5, d)
	defer c.Close()
	for _, l := range []sdpa.Layout{sdpa.BSHD, sdpa.BHSD} {
		lse, err := dev.NewTensor(b, h, s, 1, l)
		if err != nil {
			t.Fatal(err)
		}
		for _, call := range []struct {
			name string
			err  error
		}{
			{"Device.Attention", dev.Attention(out, lse, q, q, q, nil)},
			{"KVCache.Attention", c.Attention(out, lse, q, []sdpa.SeqID{id}, nil)},
		} {
			if l == sdpa.BHSD && call.err != nil {
				t.Errorf("%s, lse in BHSD: %v", call.name, call.err)
			}
			if l == sdpa.BSHD && !errors.Is(call.err, sdpa.ErrInvalid) {
				t.Errorf("%s, lse in BSHD: %v, want ErrInvalid", call.name, call.err)
			}
		}
	}
}
