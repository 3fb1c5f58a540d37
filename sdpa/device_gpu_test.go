//go:build cuda

package sdpa_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/fp8attn/fp8attn/internal/half"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestDeviceGPU: tensors of a "cuda" device live in GPU memory. Uploads and
// downloads round-trip bit for bit; Quantize on the GPU gives the host's
// codes and scales; Attention over float32 device tensors (quantized on the
// GPU) and over FP8 ones equals, bit for bit, the host-slice call on the
// same backend (its output as that call brings it down: rounded to float16
// at half.Scale of V's scales), with the accuracy options too (SmoothK and Hadamard applied
// on the GPU, the LSE corrected there); what the device cannot do is
// ErrUnsupported.
func TestDeviceGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 20))
	// D 64, and D 80, which the kernels run on zero columns (the next head
	// dim up): float32 tensors then go through Quantize and the FP8 call.
	for _, hd := range []int{64, 80} {
		for _, l := range []sdpa.Layout{sdpa.BHSD, sdpa.BSHD} {
			q := randLayout(rng, 2, 8, 70, hd, l)
			k := randLayout(rng, 2, 2, 90, hd, l)
			v := randLayout(rng, 2, 2, 90, hd, l)
			qd, kd, vd := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
			back := &sdpa.Tensor{Data: make([]float32, len(q.Data)), B: 2, H: 8, S: 70, D: hd, Layout: l}
			if err := qd.Download(back); err != nil || sameBits(back.Data, q.Data) >= 0 {
				t.Fatalf("D %d %v: round trip: %v", hd, l, err)
			}
			q8, err1 := dev.Quantize(qd)
			k8, err2 := dev.Quantize(kd)
			v8, err3 := dev.Quantize(vd)
			if err := errors.Join(err1, err2, err3); err != nil {
				t.Fatal(err)
			}
			hq, _ := sdpa.Quantize(q)
			deq, _ := hq.Dequantize()
			if err := q8.Download(back); err != nil || sameBits(back.Data, deq.Data) >= 0 {
				t.Fatalf("D %d %v: device quantization differs from the host's: %v", hd, l, err)
			}
			out, _ := dev.NewTensor(2, 8, 70, hd, l)
			lse, _ := dev.NewTensor(2, 8, 70, 1, sdpa.BHSD)
			hv, _ := sdpa.Quantize(v)
			// same runs the device call on in and the host-slice call on "cuda"
			// with options o, and requires equal bits, output (rounded as the
			// host-slice call's) and LSE.
			same := func(in [3]*sdpa.DeviceTensor, o sdpa.Options) {
				t.Helper()
				o.Mask, o.Precision = sdpa.CausalLowerRight, sdpa.FP8E4M3
				want, wantLSE := poisoned(2, 8, 70, hd)
				want.Layout = l
				ho := o
				ho.Backend = "cuda"
				if err := errors.Join(sdpa.AttentionInto(want, wantLSE, q, k, v, &ho), dev.Attention(out, lse, in[0], in[1], in[2], &o)); err != nil {
					t.Fatal(err)
				}
				got, gotLSE := poisoned(2, 8, 70, hd)
				got.Layout = l
				if err := errors.Join(out.Download(got), lse.Download(&sdpa.Tensor{Data: gotLSE, B: 2, H: 8, S: 70, D: 1})); err != nil {
					t.Fatal(err)
				}
				half.RoundOutput(got.Data, hv.Scales)
				if i := sameBits(got.Data, want.Data); i >= 0 {
					t.Fatalf("D %d %v %v inputs %+v: output %d is %g on the GPU, %g from host slices", hd, l, in[0].Precision(), o, i, got.Data[i], want.Data[i])
				}
				if i := sameBits(gotLSE, wantLSE); i >= 0 {
					t.Fatalf("D %d %v %v inputs %+v: LSE %d is %g on the GPU, %g from host slices", hd, l, in[0].Precision(), o, i, gotLSE[i], wantLSE[i])
				}
			}
			same([3]*sdpa.DeviceTensor{qd, kd, vd}, sdpa.Options{})
			same([3]*sdpa.DeviceTensor{q8, k8, v8}, sdpa.Options{})
			// The accuracy options, applied on the GPU: bit for bit the host's.
			for _, o := range []sdpa.Options{{SmoothK: true}, {Hadamard: true}, {SmoothK: true, Hadamard: true}} {
				same([3]*sdpa.DeviceTensor{qd, kd, vd}, o)
			}
			if err := dev.Attention(out, nil, qd, kd, vd, nil); !errors.Is(err, sdpa.ErrUnsupported) {
				t.Errorf("FP32 on the GPU: %v, want ErrUnsupported", err)
			}
			if err := dev.Attention(out, nil, q8, k8, v8, &sdpa.Options{SmoothK: true}); !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("SmoothK on FP8 tensors: %v, want ErrInvalid", err)
			}
			for _, x := range []*sdpa.DeviceTensor{qd, kd, vd, q8, k8, v8, out, lse} {
				if err := x.Free(); err != nil {
					t.Fatal(err)
				}
			}
			if err := qd.Download(back); !errors.Is(err, sdpa.ErrInvalid) {
				t.Errorf("download after Free: %v", err)
			}
		}
	}
	z, _ := dev.NewTensor(1, 2, 3, 16, sdpa.BHSD)
	zb := &sdpa.Tensor{Data: make([]float32, 96), B: 1, H: 2, S: 3, D: 16}
	for i := range zb.Data {
		zb.Data[i] = 7
	}
	if err := z.Download(zb); err != nil {
		t.Fatal(err)
	}
	for i, x := range zb.Data {
		if x != 0 {
			t.Fatalf("NewTensor element %d is %g, want 0", i, x)
		}
	}
}

// TestDeviceFloat32KeySplitGPU: float32 device tensors over long rows of
// keys, on a grid that few blocks fill, give bit for bit Quantize then the
// FP8 call, which divides the blocks' keys (the key split rounds otherwise
// than one walk over them): the float32 call divides them the same way.
// Outputs are poisoned before each call.
func TestDeviceFloat32KeySplitGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	for _, c := range []struct {
		hq, hkv, sq, sk, d int
		mask               sdpa.Mask
		l                  sdpa.Layout
	}{
		{32, 8, 128, 8320, 128, sdpa.CausalLowerRight, sdpa.BHSD}, // a chunk of 128 queries after 8192 keys
		{4, 2, 200, 3000, 64, sdpa.NoMask, sdpa.BSHD},
	} {
		q := randLayout(rng, 1, c.hq, c.sq, c.d, c.l)
		k := randLayout(rng, 1, c.hkv, c.sk, c.d, c.l)
		v := randLayout(rng, 1, c.hkv, c.sk, c.d, c.l)
		qd, kd, vd := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
		q8, err1 := dev.Quantize(qd)
		k8, err2 := dev.Quantize(kd)
		v8, err3 := dev.Quantize(vd)
		out, err4 := dev.NewTensor(1, c.hq, c.sq, c.d, c.l)
		lse, err5 := dev.NewTensor(1, c.hq, c.sq, 1, sdpa.BHSD)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			t.Fatal(err)
		}
		o := &sdpa.Options{Mask: c.mask, Precision: sdpa.FP8E4M3}
		var outs [2]*sdpa.Tensor
		var lses [2][]float32
		for i, in := range [][3]*sdpa.DeviceTensor{{qd, kd, vd}, {q8, k8, v8}} {
			outs[i], lses[i] = poisoned(1, c.hq, c.sq, c.d)
			outs[i].Layout = c.l
			if err := errors.Join(out.CopyFrom(outs[i]), lse.CopyFrom(&sdpa.Tensor{Data: lses[i], B: 1, H: c.hq, S: c.sq, D: 1})); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(dev.Attention(out, lse, in[0], in[1], in[2], o), out.Download(outs[i]),
				lse.Download(&sdpa.Tensor{Data: lses[i], B: 1, H: c.hq, S: c.sq, D: 1})); err != nil {
				t.Fatal(err)
			}
		}
		for i, x := range append(outs[1].Data, lses[1]...) {
			if math.IsNaN(float64(x)) || math.Float32bits(x) == sdpatest.Poison {
				t.Fatalf("%+v: output or LSE %d of the FP8 call is %g", c, i, x)
			}
		}
		if i := sameBits(outs[0].Data, outs[1].Data); i >= 0 {
			t.Fatalf("%+v: output %d is %g from float32 tensors, %g from Quantize and the FP8 call", c, i, outs[0].Data[i], outs[1].Data[i])
		}
		if i := sameBits(lses[0], lses[1]); i >= 0 {
			t.Fatalf("%+v: LSE %d is %g from float32 tensors, %g from Quantize and the FP8 call", c, i, lses[0][i], lses[1][i])
		}
		for _, x := range []*sdpa.DeviceTensor{qd, kd, vd, q8, k8, v8, out, lse} {
			if err := x.Free(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestKVCacheDeviceTensorsGPU: a cuda KV cache fed with tensors in GPU
// memory (queries read and outputs and LSE written there by the kernels)
// gives the cpu cache's result on the same tokens (the two caches hold the
// same codes, TestPagedAppendBitExact; the kernels agree within the float32
// tier, TestPagedAgainstCPU).
func TestKVCacheDeviceTensorsGPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 21))
	k := randLayout(rng, 1, 2, 100, 64, sdpa.BHSD)
	v := randLayout(rng, 1, 2, 100, 64, sdpa.BHSD)
	q := randLayout(rng, 1, 8, 1, 64, sdpa.BHSD)
	var outs [2]*sdpa.Tensor
	var lses [2][]float32
	for i, name := range []string{"cpu", "cuda"} {
		dev, err := sdpa.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 64, MaxTokens: 1024, PageSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		seq, _ := cache.AddSequence()
		kd, vd, qd := upload(t, dev, k), upload(t, dev, v), upload(t, dev, q)
		out, _ := dev.NewTensor(1, 8, 1, 64, sdpa.BHSD)
		lse, _ := dev.NewTensor(1, 8, 1, 1, sdpa.BHSD)
		if err := cache.Append([]sdpa.SeqID{seq}, kd, vd); err != nil {
			t.Fatal(err)
		}
		if err := cache.Attention(out, lse, qd, []sdpa.SeqID{seq}, nil); err != nil {
			t.Fatal(err)
		}
		outs[i] = &sdpa.Tensor{Data: make([]float32, 8*64), B: 1, H: 8, S: 1, D: 64}
		lses[i] = make([]float32, 8)
		if err := errors.Join(out.Download(outs[i]), lse.Download(&sdpa.Tensor{Data: lses[i], B: 1, H: 8, S: 1, D: 1})); err != nil {
			t.Fatal(err)
		}
	}
	for i := range lses[0] {
		if a, b := float64(lses[0][i]), float64(lses[1][i]); math.IsNaN(b) || math.Abs(a-b) > 1e-4 {
			t.Fatalf("LSE %d: cpu cache %g, cuda cache with device tensors %g", i, a, b)
		}
	}
	for i := range outs[0].Data {
		a, b := float64(outs[0].Data[i]), float64(outs[1].Data[i])
		if math.IsNaN(b) || math.Abs(a-b) > 1e-5+1e-4*math.Abs(a) {
			t.Fatalf("element %d: cpu cache %g, cuda cache with device tensors %g", i, a, b)
		}
	}
}

// BenchmarkDeviceAttentionGPU: one FP8 attention call of the sdpa Device
// API on tensors in GPU memory, mission shape, host time per call: from
// float32 device tensors (quantized on the GPU each call) and from FP8 ones.
// No host transfer but the call's one synchronization (the score-factor
// check).
func BenchmarkDeviceAttentionGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	s := sdpatest.NamedShapes["mission"]
	rng := rand.New(rand.NewPCG(1, 2))
	q, k, v := randTensor(rng, s.B, s.Hq, s.Sq, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D), randTensor(rng, s.B, s.Hkv, s.Sk, s.D)
	qd, _ := dev.Upload(q)
	kd, _ := dev.Upload(k)
	vd, _ := dev.Upload(v)
	q8, _ := dev.Quantize(qd)
	k8, _ := dev.Quantize(kd)
	v8, _ := dev.Quantize(vd)
	out, err := dev.NewTensor(s.B, s.Hq, s.Sq, s.D, sdpa.BHSD)
	if err != nil {
		b.Fatal(err)
	}
	opts := &sdpa.Options{Precision: sdpa.FP8E4M3}
	for _, c := range []struct {
		name    string
		q, k, v *sdpa.DeviceTensor
	}{{"float32-inputs", qd, kd, vd}, {"fp8-inputs", q8, k8, v8}} {
		b.Run(c.name, func(b *testing.B) {
			if err := dev.Attention(out, nil, c.q, c.k, c.v, opts); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := dev.Attention(out, nil, c.q, c.k, c.v, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/call")
		})
	}
}

// decodeCacheGPU returns a cache holding one sequence of 8192 tokens of 8
// KV heads of dim 128, and a query (32 heads), an output and the ids of a
// decode step over it.
func decodeCacheGPU(b *testing.B, dev *sdpa.Device, rng *rand.Rand) (*sdpa.KVCache, *sdpa.DeviceTensor, *sdpa.DeviceTensor, []sdpa.SeqID) {
	const hq, hkv, sk, d = 32, 8, 8192, 128
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: sk})
	if err != nil {
		b.Fatal(err)
	}
	seq, _ := cache.AddSequence()
	k, err1 := dev.Upload(randLayout(rng, 1, hkv, sk, d, sdpa.BHSD))
	v, err2 := dev.Upload(randLayout(rng, 1, hkv, sk, d, sdpa.BHSD))
	q, err3 := dev.Upload(randLayout(rng, 1, hq, 1, d, sdpa.BHSD))
	out, err4 := dev.NewTensor(1, hq, 1, d, sdpa.BHSD)
	if err := errors.Join(err1, err2, err3, err4, cache.Append([]sdpa.SeqID{seq}, k, v), k.Free(), v.Free()); err != nil {
		b.Fatal(err)
	}
	return cache, q, out, []sdpa.SeqID{seq}
}

// BenchmarkKVCacheDecodeGPU: one decode step (Sq = 1) of the sdpa KVCache
// on "cuda", B1 Hq32 Hkv8 Sk8192 D128, queries and outputs in GPU memory,
// host time per call (the call does not wait for the GPU; every 64th call
// reads the output back, so the loop cannot run ahead of the device).
func BenchmarkKVCacheDecodeGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	cache, q, out, ids := decodeCacheGPU(b, dev, rand.New(rand.NewPCG(1, 2)))
	defer cache.Close()
	host := &sdpa.Tensor{Data: make([]float32, 32*128), B: 1, H: 32, S: 1, D: 128}
	i := 0
	for b.Loop() {
		if err := cache.Attention(out, nil, q, ids, nil); err != nil {
			b.Fatal(err)
		}
		if i++; i%64 == 0 {
			if err := out.Download(host); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := out.Download(host); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/step")
}

// TestDeviceMemoryGPU: a cuda device reports the GPU memory it holds, and
// a bound on it turns an upload past it into ErrOutOfMemory.
func TestDeviceMemoryGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.SetMemoryLimit(0)
	// Idle pooled blocks that earlier calls freed would take an upload
	// without new memory: a bound below what is held frees them first.
	if err := errors.Join(dev.SetMemoryLimit(1), dev.SetMemoryLimit(0)); err != nil {
		t.Fatal(err)
	}
	x := &sdpa.Tensor{Data: make([]float32, 4<<20), B: 1, H: 1, S: 4 << 14, D: 64}
	a, err := dev.Upload(x)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	held := dev.MemoryHeld()
	if held < 16<<20 {
		t.Fatalf("held %d bytes with a 16 MB tensor uploaded", held)
	}
	if err := dev.SetMemoryLimit(held + 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Upload(x); !errors.Is(err, sdpa.ErrOutOfMemory) {
		t.Errorf("an upload past the bound: %v, want ErrOutOfMemory", err)
	}
	if err := dev.SetMemoryLimit(0); err != nil {
		t.Fatal(err)
	}
	// A tensor dropped without Free: the garbage collector's cleanup frees
	// its 16 MB, which a bound then takes back from the idle pool.
	if _, err := dev.Upload(x); err != nil {
		t.Fatal(err)
	}
	withDropped := dev.MemoryHeld()
	for i := 0; i < 100; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if err := dev.SetMemoryLimit(1); err != nil {
			t.Fatal(err)
		}
		if dev.MemoryHeld() <= withDropped-16<<20 {
			return
		}
	}
	t.Errorf("a dropped 16 MB tensor was not freed: %d bytes held, %d with it", dev.MemoryHeld(), withDropped)
}

// TestDeviceDeferredErrorGPU: a score factor only the GPU can see (scales
// quantized there, a scale that makes scores overflow float32) is not an
// error of the asynchronous Attention call but of the output's next
// Download, once; the host-slice call refuses the same inputs at once.
func TestDeviceDeferredErrorGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 22))
	q, k, v := randTensor(rng, 1, 2, 8, 64), randTensor(rng, 1, 2, 8, 64), randTensor(rng, 1, 2, 8, 64)
	opts := &sdpa.Options{Scale: 1e38, Precision: sdpa.FP8E4M3}
	if _, err := sdpa.Attention(q, k, v, &sdpa.Options{Scale: 1e38, Precision: sdpa.FP8E4M3, Backend: "cuda"}); !errors.Is(err, sdpa.ErrInvalid) {
		t.Fatalf("host-slice call with an overflowing factor: %v, want ErrInvalid", err)
	}
	qd, kd, vd := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
	out, _ := dev.NewTensor(1, 2, 8, 64, sdpa.BHSD)
	if err := dev.Attention(out, nil, qd, kd, vd, opts); err != nil {
		t.Fatalf("the asynchronous call: %v", err)
	}
	back := &sdpa.Tensor{Data: make([]float32, 2*8*64), B: 1, H: 2, S: 8, D: 64}
	if err := out.Download(back); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("the output's Download: %v, want ErrInvalid", err)
	}
	if err := out.Download(back); err != nil {
		t.Errorf("a second Download: %v (the error is reported once)", err)
	}
}

// BenchmarkGraphGPU: host time per step of two repeated steps on "cuda",
// issued call by call ("direct") and as a replayed Graph ("graph"), with
// the output read back every 64th step so that the loop cannot run ahead
// of the device: FP8 attention on float32 device tensors (quantized on the
// GPU), mission shape; and one decode step over a KVCache, B1 Hq32 Hkv8
// Sk8192 D128.
func BenchmarkGraphGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	s := sdpatest.NamedShapes["mission"]
	qd, _ := dev.Upload(randTensor(rng, s.B, s.Hq, s.Sq, s.D))
	kd, _ := dev.Upload(randTensor(rng, s.B, s.Hkv, s.Sk, s.D))
	vd, _ := dev.Upload(randTensor(rng, s.B, s.Hkv, s.Sk, s.D))
	out, _ := dev.NewTensor(s.B, s.Hq, s.Sq, s.D, sdpa.BHSD)
	opts := &sdpa.Options{Precision: sdpa.FP8E4M3}
	mission := func() error { return dev.Attention(out, nil, qd, kd, vd, opts) }

	cache, q, dout, ids := decodeCacheGPU(b, dev, rng)
	defer cache.Close()
	decode := func() error { return cache.Attention(dout, nil, q, ids, nil) }

	for _, c := range []struct {
		name string
		step func() error
		out  *sdpa.DeviceTensor
	}{{"mission-quantize-attention", mission, out}, {"decode-B1-Sk8192", decode, dout}} {
		bb, bh, bs, bd := c.out.Dims()
		host := &sdpa.Tensor{Data: make([]float32, bb*bh*bs*bd), B: bb, H: bh, S: bs, D: bd}
		run := func(b *testing.B, step func() error) {
			if err := errors.Join(step(), c.out.Download(host)); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				if err := step(); err != nil {
					b.Fatal(err)
				}
				if i++; i%64 == 0 {
					if err := c.out.Download(host); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := c.out.Download(host); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/step")
		}
		b.Run(c.name+"/direct", func(b *testing.B) { run(b, c.step) })
		b.Run(c.name+"/graph", func(b *testing.B) {
			g, err := dev.Capture(c.step)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			run(b, g.Replay)
		})
	}
}

// TestGraphConcurrentGPU: calls from other goroutines during a capture are
// not recorded (they wait for it and run), and graphs replayed from many
// goroutines beside direct calls give the direct call's bits.
func TestGraphConcurrentGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 32))
	const b, h, s, d = 1, 4, 64, 64
	in := [3]*sdpa.Tensor{randTensor(rng, b, h, s, d), randTensor(rng, b, h, s, d), randTensor(rng, b, h, s, d)}
	q, k, v := upload(t, dev, in[0]), upload(t, dev, in[1]), upload(t, dev, in[2])
	opts := &sdpa.Options{Precision: sdpa.FP8E4M3}
	want, _ := dev.NewTensor(b, h, s, d, sdpa.BHSD)
	if err := dev.Attention(want, nil, q, k, v, opts); err != nil {
		t.Fatal(err)
	}
	w := download(t, want)
	const workers = 4
	outs := make([]*sdpa.DeviceTensor, workers)
	for i := range outs {
		outs[i], _ = dev.NewTensor(b, h, s, d, sdpa.BHSD)
	}
	// While worker 0 captures (and sleeps inside fn), the others call
	// directly and read their outputs back.
	started := make(chan struct{})
	errs := make(chan error, workers)
	var g *sdpa.Graph
	go func() {
		var err error
		g, err = dev.Capture(func() error {
			close(started)
			time.Sleep(20 * time.Millisecond)
			return dev.Attention(outs[0], nil, q, k, v, opts)
		})
		errs <- err
	}()
	<-started
	for i := 1; i < workers; i++ {
		go func() {
			got, _ := poisoned(b, h, s, d)
			err := errors.Join(outs[i].CopyFrom(got), dev.Attention(outs[i], nil, q, k, v, opts), outs[i].Download(got))
			if err == nil && sameBits(got.Data, w.Data) >= 0 {
				err = errors.New("a direct call during a capture gave other bits")
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer g.Close()
	// Replays from several goroutines, beside direct calls.
	for i := range workers {
		go func() {
			var err error
			for range 20 {
				if i == 0 {
					err = errors.Join(err, g.Replay())
				} else {
					err = errors.Join(err, dev.Attention(outs[i], nil, q, k, v, opts))
				}
			}
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range workers {
		if got := download(t, outs[i]); sameBits(got.Data, w.Data) >= 0 {
			t.Fatalf("output %d differs from the direct call", i)
		}
	}
}

// BenchmarkKVCacheAppendGPU: KVCache.Append on "cuda" with keys and values
// in GPU memory, host time per call: a decode step's tokens (one for each
// of 8 sequences) and a prefill chunk (1024 tokens of one sequence), 8 KV
// heads of dim 128. The call checks the values for NaN and ±Inf before
// writing, so it waits for the device.
func BenchmarkKVCacheAppendGPU(b *testing.B) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		b.Skipf("no cuda device: %v", err)
	}
	const hkv, d, seqs, maxLen = 8, 128, 8, 4096
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name   string
		nb, nt int
	}{{"decode-8x1", seqs, 1}, {"prefill-1x1024", 1, 1024}} {
		b.Run(c.name, func(b *testing.B) {
			cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: seqs * maxLen, MaxSeqLen: maxLen})
			if err != nil {
				b.Fatal(err)
			}
			defer cache.Close()
			k, err1 := dev.Upload(randLayout(rng, c.nb, hkv, c.nt, d, sdpa.BSHD))
			v, err2 := dev.Upload(randLayout(rng, c.nb, hkv, c.nt, d, sdpa.BSHD))
			if err := errors.Join(err1, err2); err != nil {
				b.Fatal(err)
			}
			ids := make([]sdpa.SeqID, c.nb)
			for i := range ids {
				ids[i], _ = cache.AddSequence()
			}
			reset := func() { // (IDs are never reused)
				for i := range ids {
					cache.Drop(ids[i])
					ids[i], _ = cache.AddSequence()
				}
			}
			n := 0
			for b.Loop() {
				if n += c.nt; n > maxLen {
					reset()
					n = c.nt
				}
				if err := cache.Append(ids, k, v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/call")
		})
	}
}

// TestGraphDroppedGPU: a graph dropped without Close is closed by the
// garbage collector, and the cache it pinned can then be closed.
func TestGraphDroppedGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 64, MaxTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := cache.AddSequence()
	kv := upload(t, dev, randLayout(rand.New(rand.NewPCG(1, 2)), 1, 2, 10, 64, sdpa.BHSD))
	q, _ := dev.NewTensor(1, 4, 1, 64, sdpa.BHSD)
	out, _ := dev.NewTensor(1, 4, 1, 64, sdpa.BHSD)
	if err := cache.Append([]sdpa.SeqID{seq}, kv, kv); err != nil {
		t.Fatal(err)
	}
	func() {
		g, err := dev.Capture(func() error { return cache.Attention(out, nil, q, []sdpa.SeqID{seq}, nil) })
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(g.Replay(), cache.Close()); !errors.Is(err, sdpa.ErrInvalid) {
			t.Fatalf("closing a cache a live graph reads: %v, want ErrInvalid", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		err := cache.Close()
		if err == nil {
			break
		}
		if !errors.Is(err, sdpa.ErrInvalid) || time.Now().After(deadline) {
			t.Fatalf("the dropped graph still pins the cache: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := errors.Join(q.Free(), out.Free(), kv.Free()); err != nil {
		t.Fatal(err)
	}
}
