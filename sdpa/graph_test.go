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

// graphDevices returns the devices the graph tests run on: "cpu" (whose
// graphs call the captured function again) always, "cuda" (CUDA graphs)
// where this build and machine have it.
func graphDevices(t testing.TB) []*sdpa.Device {
	var devs []*sdpa.Device
	for _, name := range []string{"cpu", "cuda"} {
		dev, err := sdpa.Open(name)
		if err != nil {
			if name == "cpu" {
				t.Fatal(err)
			}
			t.Logf("%s: %v (not tested)", name, err)
			continue
		}
		devs = append(devs, dev)
	}
	return devs
}

// records reports whether dev's graphs record work instead of running it
// at Capture ("cuda").
func records(dev *sdpa.Device) bool { return dev.Name() == "cuda" }

// download returns t's contents as a host tensor of its shape.
func download(t *testing.T, x *sdpa.DeviceTensor) *sdpa.Tensor {
	t.Helper()
	b, h, s, d := x.Dims()
	h2 := &sdpa.Tensor{Data: make([]float32, b*h*s*d), B: b, H: h, S: s, D: d, Layout: x.Layout()}
	if err := x.Download(h2); err != nil {
		t.Fatal(err)
	}
	return h2
}

// fill writes src into x (shapes match), or poison when src is nil.
func fill(t *testing.T, x *sdpa.DeviceTensor, src *sdpa.Tensor) {
	t.Helper()
	if src == nil {
		b, h, s, d := x.Dims()
		src, _ = poisoned(b, h, s, d)
		src.Layout = x.Layout()
	}
	if err := x.CopyFrom(src); err != nil {
		t.Fatal(err)
	}
}

// scaled returns x times f.
func scaled(x *sdpa.Tensor, f float32) *sdpa.Tensor {
	y := *x
	y.Data = make([]float32, len(x.Data))
	for i, v := range x.Data {
		y.Data[i] = v * f
	}
	return &y
}

// TestGraphAttention: a graph of one FP8 attention on float32 device
// tensors (quantized on the device, then attention), replayed on new
// inputs written between replays, gives bit for bit the direct call on
// those inputs, output and LSE; on a device that records ("cuda"), Capture
// itself computes nothing (the poisoned output stays).
func TestGraphAttention(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	for _, dev := range graphDevices(t) {
		t.Run(dev.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 30))
			const b, hq, hkv, sq, sk, d = 2, 4, 2, 70, 90, 64
			l := sdpa.BSHD
			q, _ := dev.NewTensor(b, hq, sq, d, l)
			k, _ := dev.NewTensor(b, hkv, sk, d, l)
			v, _ := dev.NewTensor(b, hkv, sk, d, l)
			out, _ := dev.NewTensor(b, hq, sq, d, l)
			lse, _ := dev.NewTensor(b, hq, sq, 1, sdpa.BHSD)
			want, _ := dev.NewTensor(b, hq, sq, d, l)
			wantLSE, _ := dev.NewTensor(b, hq, sq, 1, sdpa.BHSD)
			opts := &sdpa.Options{Precision: sdpa.FP8E4M3, Mask: sdpa.CausalLowerRight}
			fill(t, out, nil)
			dirtyPool(t, dev)
			g, err := dev.Capture(func() error { return dev.Attention(out, lse, q, k, v, opts) })
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if records(dev) {
				if got := download(t, out); sameBits(got.Data, mustPoison(len(got.Data))) >= 0 {
					t.Fatal("Capture wrote the output: the work ran instead of being recorded")
				}
			}
			// Each round new inputs, at new magnitudes (new scales).
			for round, mag := range []float32{1, 300, 1e-3} {
				fill(t, q, scaled(randLayout(rng, b, hq, sq, d, l), mag))
				fill(t, k, scaled(randLayout(rng, b, hkv, sk, d, l), mag))
				fill(t, v, scaled(randLayout(rng, b, hkv, sk, d, l), 1/mag))
				fill(t, out, nil)
				fill(t, lse, nil)
				if err := errors.Join(g.Replay(), dev.Attention(want, wantLSE, q, k, v, opts)); err != nil {
					t.Fatal(err)
				}
				got, gotLSE, w, wl := download(t, out), download(t, lse), download(t, want), download(t, wantLSE)
				if i := sameBits(got.Data, w.Data); i >= 0 {
					t.Fatalf("round %d: output %d is %g replayed, %g called", round, i, got.Data[i], w.Data[i])
				}
				if i := sameBits(gotLSE.Data, wl.Data); i >= 0 {
					t.Fatalf("round %d: LSE %d is %g replayed, %g called", round, i, gotLSE.Data[i], wl.Data[i])
				}
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			if err := g.Replay(); !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("Replay after Close: %v, want ErrInvalid", err)
			}
			for _, x := range []*sdpa.DeviceTensor{q, k, v, out, lse, want, wantLSE} {
				if err := x.Free(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// dirtyPool leaves small buffers full of poison in the device's pool, so
// that memory a capture allocates and must initialize before the first
// replay (a flag word) is not zero by luck.
func dirtyPool(t *testing.T, dev *sdpa.Device) {
	t.Helper()
	var ts []*sdpa.DeviceTensor
	for range 16 {
		x, err := dev.NewTensor(1, 1, 1, 64, sdpa.BHSD)
		if err != nil {
			t.Fatal(err)
		}
		fill(t, x, nil)
		ts = append(ts, x)
	}
	download(t, ts[0]) // (waits for the fills)
	for _, x := range ts {
		if err := x.Free(); err != nil {
			t.Fatal(err)
		}
	}
}

func mustPoison(n int) []float32 {
	p, _ := poisoned(1, 1, 1, n)
	return p.Data
}

// TestGraphKVCacheDecode: one decode step over a KVCache captured once and
// replayed while the sequences grow token by token (across page
// boundaries) gives the direct call's result at every step. The graph
// plans its launch for MaxSeqLen while the direct call plans for the
// lengths of the step, so on "cuda" the two may split the keys differently
// and merge the splits in another order: they agree within the float32
// rounding of the merge (a relative 2^-17 of the largest |V| and of the
// LSE, for up to 256 splits of a few roundings each; a step missing one
// token of the 2-40 a query sees differs by orders of magnitude more).
func TestGraphKVCacheDecode(t *testing.T) {
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	const hq, hkv, d, steps = 8, 2, 64, 80
	prefill := []int{50, 130, 1}
	for _, dev := range graphDevices(t) {
		t.Run(dev.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 31))
			cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 4096, PageSize: 64, MaxSeqLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer cache.Close()
			ids := make([]sdpa.SeqID, len(prefill))
			for i, n := range prefill {
				ids[i], _ = cache.AddSequence()
				kt, vt := upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD))
				if err := cache.Append(ids[i:i+1], kt, vt); err != nil {
					t.Fatal(err)
				}
			}
			nb := len(ids)
			q, _ := dev.NewTensor(nb, hq, 1, d, sdpa.BHSD)
			out, _ := dev.NewTensor(nb, hq, 1, d, sdpa.BHSD)
			lse, _ := dev.NewTensor(nb, hq, 1, 1, sdpa.BHSD)
			want, _ := dev.NewTensor(nb, hq, 1, d, sdpa.BHSD)
			wantLSE, _ := dev.NewTensor(nb, hq, 1, 1, sdpa.BHSD)
			opts := &sdpa.Options{Mask: sdpa.CausalLowerRight}
			fill(t, q, randLayout(rng, nb, hq, 1, d, sdpa.BHSD))
			g, err := dev.Capture(func() error { return cache.Attention(out, lse, q, ids, opts) })
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			kt, _ := dev.NewTensor(nb, hkv, 1, d, sdpa.BHSD)
			vt, _ := dev.NewTensor(nb, hkv, 1, d, sdpa.BHSD)
			for step := range steps {
				vals := randLayout(rng, nb, hkv, 1, d, sdpa.BHSD)
				fill(t, kt, randLayout(rng, nb, hkv, 1, d, sdpa.BHSD))
				fill(t, vt, vals)
				if err := cache.Append(ids, kt, vt); err != nil {
					t.Fatal(err)
				}
				fill(t, q, randLayout(rng, nb, hq, 1, d, sdpa.BHSD))
				fill(t, out, nil)
				fill(t, lse, nil)
				if err := errors.Join(g.Replay(), cache.Attention(want, wantLSE, q, ids, opts)); err != nil {
					t.Fatal(err)
				}
				got, gotLSE, w, wl := download(t, out), download(t, lse), download(t, want), download(t, wantLSE)
				const rel = 1.0 / (1 << 17)
				vmax := float32(8) // |V| of N(0,1) rows: E4M3 rounding of values within 8
				for i := range got.Data {
					if e := math.Abs(float64(got.Data[i] - w.Data[i])); !(e <= rel*float64(vmax)) {
						t.Fatalf("step %d: output %d is %g replayed, %g called", step, i, got.Data[i], w.Data[i])
					}
				}
				for i := range gotLSE.Data {
					if e := math.Abs(float64(gotLSE.Data[i] - wl.Data[i])); !(e <= rel*(1+math.Abs(float64(wl.Data[i])))) {
						t.Fatalf("step %d: LSE %d is %g replayed, %g called", step, i, gotLSE.Data[i], wl.Data[i])
					}
				}
			}
			// The sequences are within MaxSeqLen (256): the longest holds
			// 130+80 tokens; 47 more pass it.
			big := upload(t, dev, randLayout(rng, 1, hkv, 47, d, sdpa.BHSD))
			if err := cache.Append(ids[1:2], big, big); !errors.Is(err, sdpa.ErrCacheFull) {
				t.Errorf("append past MaxSeqLen: %v, want ErrCacheFull", err)
			}
			if dev.Name() == "cuda" {
				if err := cache.Close(); !errors.Is(err, sdpa.ErrInvalid) {
					t.Errorf("closing a cache a live graph reads: %v, want ErrInvalid", err)
				}
				if err := q.Free(); !errors.Is(err, sdpa.ErrInvalid) {
					t.Errorf("freeing a tensor a live graph reads: %v, want ErrInvalid", err)
				}
			}
			if err := cache.Drop(ids[2]); err != nil {
				t.Fatal(err)
			}
			if err := g.Replay(); !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("replay over a dropped sequence: %v, want ErrInvalid", err)
			}
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			for _, x := range []*sdpa.DeviceTensor{q, out, lse, want, wantLSE, kt, vt, big} {
				if err := x.Free(); err != nil {
					t.Fatal(err)
				}
			}
			if err := cache.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCaptureErrors: a nil function, a nil device and a graph not made by
// Capture are refused, and Capture returns the error of its function (the
// rules of what a capture may do: TestGraphRules).
func TestCaptureErrors(t *testing.T) {
	for _, dev := range graphDevices(t) {
		t.Run(dev.Name(), func(t *testing.T) {
			if _, err := dev.Capture(nil); !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("Capture(nil): %v, want ErrInvalid", err)
			}
			var nilDev *sdpa.Device
			if _, err := nilDev.Capture(func() error { return nil }); !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("nil device: %v, want ErrInvalid", err)
			}
			boom := errors.New("boom")
			if _, err := dev.Capture(func() error { return boom }); !errors.Is(err, boom) {
				t.Errorf("a failing function: %v, want its error", err)
			}
			var nilGraph *sdpa.Graph
			for _, g := range []*sdpa.Graph{nilGraph, {}} {
				if err := g.Replay(); !errors.Is(err, sdpa.ErrInvalid) {
					t.Errorf("a graph not made by Capture: %v, want ErrInvalid", err)
				}
				if err := g.Close(); err != nil {
					t.Errorf("closing a graph not made by Capture: %v", err)
				}
			}
		})
	}
}

// A decode step captured once and replayed as the sequence grows: on
// "cuda" a CUDA graph (one launch a step), on "cpu" the step called again.
func ExampleDevice_Capture() {
	dev, err := sdpa.Open("cpu") // "cuda" on a GPU host (build with -tags cuda)
	if err != nil {
		panic(err)
	}
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: 2, MaxTokens: 1024, MaxSeqLen: 512})
	if err != nil {
		panic(err)
	}
	seq, _ := cache.AddSequence()
	ids := []sdpa.SeqID{seq}
	q, _ := dev.Upload(&sdpa.Tensor{Data: []float32{1, 0}, B: 1, H: 1, S: 1, D: 2})
	out, _ := dev.NewTensor(1, 1, 1, 2, sdpa.BHSD)
	kv, _ := dev.NewTensor(1, 1, 1, 2, sdpa.BHSD)
	kv.CopyFrom(&sdpa.Tensor{Data: []float32{0, 1}, B: 1, H: 1, S: 1, D: 2})
	cache.Append(ids, kv, kv) // the first token
	step, err := dev.Capture(func() error {
		return cache.Attention(out, nil, q, ids, &sdpa.Options{Scale: 1})
	})
	if err != nil {
		panic(err)
	}
	defer step.Close()
	res := &sdpa.Tensor{Data: make([]float32, 2), B: 1, H: 1, S: 1, D: 2}
	for pos := 1; pos <= 3; pos++ {
		kv.CopyFrom(&sdpa.Tensor{Data: []float32{float32(pos), 1}, B: 1, H: 1, S: 1, D: 2})
		if err := cache.Append(ids, kv, kv); err != nil {
			panic(err)
		}
		if err := step.Replay(); err != nil { // reads the sequence as it is now
			panic(err)
		}
		out.Download(res)
		n, _ := cache.Len(seq)
		fmt.Printf("tokens %d: out %.4f\n", n, res.Data)
	}
	// Output:
	// tokens 2: out [0.7311 1.0000]
	// tokens 3: out [1.5752 1.0000]
	// tokens 4: out [2.4927 1.0000]
}

// TestReplayFailsBeforeWriting: on the cpu device, a graph of an attention
// and then a KVCache.Attention whose sequence was dropped since the
// capture fails its replay with ErrInvalid before either call writes: the
// first call's output keeps what it held.
func TestReplayFailsBeforeWriting(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 59))
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	const h, s, d = 2, 4, 16
	q := upload(t, dev, randLayout(rng, 1, h, s, d, sdpa.BHSD))
	held := randLayout(rng, 1, h, s, d, sdpa.BHSD)
	out1, out2 := upload(t, dev, held), upload(t, dev, held)
	c, id := cacheOfOne(t, rng, dev, h, 8, d)
	defer c.Close()
	g, err := dev.Capture(func() error {
		return errors.Join(dev.Attention(out1, nil, q, q, q, nil), c.Attention(out2, nil, q, []sdpa.SeqID{id}, nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := out1.CopyFrom(held); err != nil { // (the capture ran the calls once)
		t.Fatal(err)
	}
	if err := c.Drop(id); err != nil {
		t.Fatal(err)
	}
	if err := g.Replay(); !errors.Is(err, sdpa.ErrInvalid) {
		t.Fatalf("replay over a dropped sequence: %v, want ErrInvalid", err)
	}
	got := &sdpa.Tensor{Data: make([]float32, len(held.Data)), B: 1, H: h, S: s, D: d}
	if err := out1.Download(got); err != nil {
		t.Fatal(err)
	}
	if i := sameBits(got.Data, held.Data); i >= 0 {
		t.Fatalf("the failed replay wrote the first call's output: element %d is %g, was %g", i, got.Data[i], held.Data[i])
	}
}
