package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/allocs"
	"github.com/fp8attn/fp8attn/internal/layout"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// randLayout is randTensor in layout l.
func randLayout(rng *rand.Rand, b, h, s, d int, l sdpa.Layout) *sdpa.Tensor {
	t := randTensor(rng, b, h, s, d)
	t.Layout = l
	return t
}

// rows returns positions [from, to) of a [1][H][S][D] tensor as a new
// [1][H][to-from][D] tensor in the same layout.
func rows(t *sdpa.Tensor, from, to int) *sdpa.Tensor {
	r := &sdpa.Tensor{Data: make([]float32, t.H*(to-from)*t.D), B: 1, H: t.H, S: to - from, D: t.D, Layout: t.Layout}
	for h := range t.H {
		for i := from; i < to; i++ {
			src := t.Layout.Offset(0, h, i, t.H, t.S, t.D)
			dst := r.Layout.Offset(0, h, i-from, r.H, r.S, r.D)
			copy(r.Data[dst:dst+t.D], t.Data[src:src+t.D])
		}
	}
	return r
}

func upload(t *testing.T, dev *sdpa.Device, x *sdpa.Tensor) *sdpa.DeviceTensor {
	t.Helper()
	d, err := dev.Upload(x)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// cacheOfOne returns a kv cache of dev (hkv heads of d, 64 tokens) holding
// one sequence of n random tokens, and the sequence's ID.
func cacheOfOne(t *testing.T, rng *rand.Rand, dev *sdpa.Device, hkv, n, d int) (*sdpa.KVCache, sdpa.SeqID) {
	t.Helper()
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.AddSequence()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Append([]sdpa.SeqID{id}, upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD))); err != nil {
		t.Fatal(err)
	}
	return c, id
}

// cacheAttend appends k and v (positions [from, to) of the whole-sequence
// tensors) to seq and returns the attention of those positions' queries.
func cacheAttend(t *testing.T, dev *sdpa.Device, c *sdpa.KVCache, seq sdpa.SeqID, q, k, v *sdpa.Tensor, from, to int) (*sdpa.Tensor, []float32) {
	t.Helper()
	if err := c.Append([]sdpa.SeqID{seq}, upload(t, dev, rows(k, from, to)), upload(t, dev, rows(v, from, to))); err != nil {
		t.Fatal(err)
	}
	qd := upload(t, dev, rows(q, from, to))
	out, _ := dev.NewTensor(1, q.H, to-from, q.D, q.Layout)
	lse, _ := dev.NewTensor(1, q.H, to-from, 1, sdpa.BHSD)
	if err := c.Attention(out, lse, qd, []sdpa.SeqID{seq}, &sdpa.Options{Mask: sdpa.CausalLowerRight}); err != nil {
		t.Fatal(err)
	}
	o := &sdpa.Tensor{Data: make([]float32, q.H*(to-from)*q.D), B: 1, H: q.H, S: to - from, D: q.D, Layout: q.Layout}
	l := &sdpa.Tensor{Data: make([]float32, q.H*(to-from)), B: 1, H: q.H, S: to - from, D: 1}
	if err := out.Download(o); err != nil {
		t.Fatal(err)
	}
	if err := lse.Download(l); err != nil {
		t.Fatal(err)
	}
	return o, l.Data
}

// TestKVCachePrefillThenDecode: a prompt appended and attended as one chunk,
// then tokens appended and attended one at a time, gives the rows that one
// call over the whole sequence (appended at once) gives. Both caches hold
// the same codes (a page's scale depends only on its tokens, in order), so
// the two differ only by float32 rounding: each is within FP32Tolerance of
// exact attention on those codes, so they are within twice it of each other
// (M computed on the inputs grown by 1/16, the most E4M3 rounding adds).
// The whole-sequence result is also held to the FP8 accuracy yardstick: its
// relative L2 error against float64 on the unquantized inputs is at most
// 1.3x the error that quantizing K and V per (batch, head) alone causes.
// Between sequences, another sequence is added, filled and dropped, so
// that pages are reused.
func TestKVCachePrefillThenDecode(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for ci, tc := range []struct {
		hkv, group, d, prompt, steps int
		layout                       sdpa.Layout
	}{
		{2, 4, 64, 70, 70, sdpa.BHSD},
		{1, 1, 128, 1, 100, sdpa.BSHD},
		{4, 2, 32, 200, 10, sdpa.BSHD},
	} {
		t.Run(fmt.Sprintf("hkv%d-g%d-d%d-prompt%d-%v", tc.hkv, tc.group, tc.d, tc.prompt, tc.layout), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(sd, uint64(ci)))
			S, hq := tc.prompt+tc.steps, tc.hkv*tc.group
			q := randLayout(rng, 1, hq, S, tc.d, tc.layout)
			k := randLayout(rng, 1, tc.hkv, S, tc.d, tc.layout)
			v := randLayout(rng, 1, tc.hkv, S, tc.d, tc.layout)
			cfg := sdpa.KVCacheConfig{KVHeads: tc.hkv, HeadDim: tc.d, MaxTokens: 3 * S}
			whole, err := dev.NewKVCache(cfg)
			if err != nil {
				t.Fatal(err)
			}
			inc, _ := dev.NewKVCache(cfg)
			other, _ := inc.AddSequence()
			if err := inc.Append([]sdpa.SeqID{other}, upload(t, dev, rows(k, 0, 65)), upload(t, dev, rows(v, 0, 65))); err != nil {
				t.Fatal(err)
			}
			if err := inc.Drop(other); err != nil {
				t.Fatal(err)
			}
			ws, _ := whole.AddSequence()
			want, wantLSE := cacheAttend(t, dev, whole, ws, q, k, v, 0, S)

			is, _ := inc.AddSequence()
			got := &sdpa.Tensor{Data: make([]float32, len(want.Data)), B: 1, H: hq, S: S, D: tc.d, Layout: tc.layout}
			gotLSE := make([]float32, hq*S)
			put := func(o *sdpa.Tensor, lse []float32, from int) {
				for h := range hq {
					for i := range o.S {
						src := o.Layout.Offset(0, h, i, hq, o.S, tc.d)
						dst := got.Layout.Offset(0, h, from+i, hq, S, tc.d)
						copy(got.Data[dst:dst+tc.d], o.Data[src:src+tc.d])
						gotLSE[h*S+from+i] = lse[h*o.S+i]
					}
				}
			}
			o, l := cacheAttend(t, dev, inc, is, q, k, v, 0, tc.prompt)
			put(o, l, 0)
			for i := tc.prompt; i < S; i++ {
				o, l := cacheAttend(t, dev, inc, is, q, k, v, i, i+1)
				put(o, l, i)
			}
			if n, _ := inc.Len(is); n != S {
				t.Fatalf("Len = %d, want %d", n, S)
			}

			sh := backend.Shape{B: 1, Hq: hq, Hkv: tc.hkv, Sq: S, Sk: S, D: tc.d}
			grow := func(x *sdpa.Tensor) []float32 {
				y := make([]float32, len(x.Data))
				for i, e := range x.Data {
					y[i] = e * 17 / 16
				}
				return layout.Permute(y, 1, x.H, S, tc.d, backend.BHSD) // layout does not matter to the bound
			}
			bp := &backend.Problem{Shape: sh, Scale: float32(1 / math.Sqrt(float64(tc.d))), Mask: backend.CausalLowerRight,
				Q: q.Data, K: grow(k), V: grow(v), Out: make([]float32, len(q.Data))}
			tol := sdpatest.FP32Tolerance(bp)
			tol.Atol, tol.Rtol = 2*tol.Atol, 2*tol.Rtol
			if st := sdpatest.Compare(got.Data, want.Data, tol); st.Beyond > 0 {
				t.Errorf("incremental vs whole: %v", st)
			}
			lt := sdpatest.LSETolerance(bp)
			lt.Atol, lt.Rtol = 2*lt.Atol, 2*lt.Rtol
			if st := sdpatest.Compare(gotLSE, wantLSE, lt); st.Beyond > 0 {
				t.Errorf("incremental vs whole LSE: %v", st)
			}

			// The yardstick: exact attention on the unquantized inputs.
			exact := &backend.Problem{Shape: sh, Scale: bp.Scale, Mask: backend.CausalLowerRight, Layout: tc.layout,
				Q: q.Data, K: k.Data, V: v.Data, Out: make([]float32, len(q.Data))}
			ref, _ := oracle.Naive(exact)
			kq, _ := sdpa.Quantize(k)
			vq, _ := sdpa.Quantize(v)
			kd, _ := kq.Dequantize()
			vd, _ := vq.Dequantize()
			quant := *exact
			quant.K, quant.V = kd.Data, vd.Data
			qref, _ := oracle.Naive(&quant)
			e, e0 := relL2(want.Data, ref), relL2(qref, ref)
			t.Logf("relative L2 error %.4g; K, V quantized per head alone: %.4g (ratio %.3f)", e, e0, e/e0)
			if !(e <= 1.3*e0) {
				t.Errorf("relative L2 error %.4g > 1.3 × %.4g", e, e0)
			}
		})
	}
}

func relL2[A, B float32 | float64](got []A, want []B) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// TestKVCacheBatch: one call over sequences of different lengths equals a
// call per sequence, bit for bit (each sequence's rows are computed the same
// way either way on one worker).
func TestKVCacheBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 3))
	be, err := sdpa.Open("cpu/go")
	if err != nil {
		t.Fatal(err)
	}
	const hkv, g, d = 2, 2, 16
	c, _ := be.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 1024})
	lens := []int{5, 130, 64}
	var ids []sdpa.SeqID
	for _, n := range lens {
		id, _ := c.AddSequence()
		ids = append(ids, id)
		if err := c.Append([]sdpa.SeqID{id}, upload(t, be, randLayout(rng, 1, hkv, n, d, sdpa.BHSD)), upload(t, be, randLayout(rng, 1, hkv, n, d, sdpa.BHSD))); err != nil {
			t.Fatal(err)
		}
	}
	// One batched append of two tokens to each.
	if err := c.Append(ids, upload(t, be, randLayout(rng, 3, hkv, 2, d, sdpa.BSHD)), upload(t, be, randLayout(rng, 3, hkv, 2, d, sdpa.BSHD))); err != nil {
		t.Fatal(err)
	}
	q := randLayout(rng, 3, hkv*g, 2, d, sdpa.BHSD)
	out, _ := be.NewTensor(3, hkv*g, 2, d, sdpa.BHSD)
	opts := &sdpa.Options{Mask: sdpa.CausalLowerRight}
	if err := c.Attention(out, nil, upload(t, be, q), ids, opts); err != nil {
		t.Fatal(err)
	}
	all := &sdpa.Tensor{Data: make([]float32, len(q.Data)), B: 3, H: hkv * g, S: 2, D: d}
	out.Download(all)
	n := hkv * g * 2 * d
	for b, id := range ids {
		qb := &sdpa.Tensor{Data: q.Data[b*n : (b+1)*n], B: 1, H: hkv * g, S: 2, D: d}
		ob, _ := be.NewTensor(1, hkv*g, 2, d, sdpa.BHSD)
		if err := c.Attention(ob, nil, upload(t, be, qb), []sdpa.SeqID{id}, opts); err != nil {
			t.Fatal(err)
		}
		one := &sdpa.Tensor{Data: make([]float32, n), B: 1, H: hkv * g, S: 2, D: d}
		ob.Download(one)
		if i := sameBits(one.Data, all.Data[b*n:(b+1)*n]); i >= 0 {
			t.Errorf("sequence %d (%d tokens): element %d differs alone and in the batch", b, lens[b]+2, i)
		}
	}
}

// TestKVCachePrecisionCPU: on the cpu device, which has no FP8 prefill
// kernel, a chunk with Precision FP8E4M3 computes as with FP32, bit for bit
// (KVCache.Attention: "elsewhere it computes as FP32"), output and LSE.
func TestKVCachePrecisionCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 5))
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	const hkv, g, d, n, sq = 2, 4, 32, 300, 200
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := c.AddSequence()
	if err := c.Append([]sdpa.SeqID{id}, upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, hkv, n, d, sdpa.BHSD))); err != nil {
		t.Fatal(err)
	}
	q := upload(t, dev, randLayout(rng, 1, hkv*g, sq, d, sdpa.BHSD))
	var got [2][2][]float32 // out and LSE, per precision
	for i, pr := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
		out, _ := dev.NewTensor(1, hkv*g, sq, d, sdpa.BHSD)
		lse, _ := dev.NewTensor(1, hkv*g, sq, 1, sdpa.BHSD)
		if err := c.Attention(out, lse, q, []sdpa.SeqID{id}, &sdpa.Options{Mask: sdpa.CausalLowerRight, Precision: pr}); err != nil {
			t.Fatal(err)
		}
		o := &sdpa.Tensor{Data: make([]float32, hkv*g*sq*d), B: 1, H: hkv * g, S: sq, D: d}
		l := &sdpa.Tensor{Data: make([]float32, hkv*g*sq), B: 1, H: hkv * g, S: sq, D: 1}
		if err := errors.Join(out.Download(o), lse.Download(l)); err != nil {
			t.Fatal(err)
		}
		got[i] = [2][]float32{o.Data, l.Data}
	}
	for k, what := range []string{"out", "lse"} {
		if i := sameBits(got[1][k], got[0][k]); i >= 0 {
			t.Errorf("%s element %d: FP8E4M3 %v, FP32 %v", what, i, got[1][k][i], got[0][k][i])
		}
	}
}

// TestKVCacheErrors: bad calls are errors, and leave the cache unchanged.
func TestKVCacheErrors(t *testing.T) {
	dev, _ := sdpa.Open("cpu")
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 4))
	const d = 8
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: d, MaxTokens: 192})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.AddSequence()
	b, _ := c.AddSequence()
	kv := func(n int) *sdpa.DeviceTensor { return upload(t, dev, randLayout(rng, 1, 1, n, d, sdpa.BHSD)) }
	if err := c.Append([]sdpa.SeqID{a}, kv(100), kv(100)); err != nil {
		t.Fatal(err)
	}
	nan := randLayout(rng, 1, 1, 3, d, sdpa.BHSD)
	nan.Data[5] = float32(math.NaN())
	q := upload(t, dev, randLayout(rng, 1, 2, 1, d, sdpa.BHSD))
	out, _ := dev.NewTensor(1, 2, 1, d, sdpa.BHSD)
	other, _ := sdpa.Open("cpu/go")
	foreign := upload(t, other, randLayout(rng, 1, 1, 1, d, sdpa.BHSD))
	freed := kv(1)
	freed.Free()
	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"full", sdpa.ErrCacheFull, func() error { return c.Append([]sdpa.SeqID{b}, kv(65), kv(65)) }},
		{"nan", sdpa.ErrInvalid, func() error { return c.Append([]sdpa.SeqID{b}, upload(t, dev, nan), kv(3)) }},
		{"unknown sequence", sdpa.ErrInvalid, func() error { return c.Append([]sdpa.SeqID{7}, kv(1), kv(1)) }},
		{"sequence twice", sdpa.ErrInvalid, func() error {
			two := upload(t, dev, randLayout(rng, 2, 1, 1, d, sdpa.BHSD))
			return c.Append([]sdpa.SeqID{b, b}, two, two)
		}},
		{"wrong heads", sdpa.ErrInvalid, func() error {
			x := upload(t, dev, randLayout(rng, 1, 2, 1, d, sdpa.BHSD))
			return c.Append([]sdpa.SeqID{b}, x, x)
		}},
		{"fp8 keys", sdpa.ErrInvalid, func() error { x, _ := dev.Quantize(kv(1)); return c.Append([]sdpa.SeqID{b}, x, x) }},
		{"other device", sdpa.ErrInvalid, func() error { return c.Append([]sdpa.SeqID{b}, foreign, foreign) }},
		{"freed", sdpa.ErrInvalid, func() error { return c.Append([]sdpa.SeqID{b}, freed, freed) }},
		{"upper-left mask", sdpa.ErrInvalid, func() error {
			return c.Attention(out, nil, q, []sdpa.SeqID{a}, &sdpa.Options{Mask: sdpa.CausalUpperLeft})
		}},
		{"smoothing", sdpa.ErrUnsupported, func() error { return c.Attention(out, nil, q, []sdpa.SeqID{a}, &sdpa.Options{SmoothK: true}) }},
		{"unknown precision", sdpa.ErrInvalid, func() error {
			return c.Attention(out, nil, q, []sdpa.SeqID{a}, &sdpa.Options{Precision: sdpa.FP8E4M3 + 1})
		}},
		{"other backend", sdpa.ErrInvalid, func() error { return c.Attention(out, nil, q, []sdpa.SeqID{a}, &sdpa.Options{Backend: "reference"}) }},
		{"batch mismatch", sdpa.ErrInvalid, func() error { return c.Attention(out, nil, q, []sdpa.SeqID{a, b}, nil) }},
		{"dropped", sdpa.ErrInvalid, func() error {
			c2, _ := c.AddSequence()
			c.Drop(c2)
			return c.Attention(out, nil, q, []sdpa.SeqID{c2}, nil)
		}},
	} {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
		if n, _ := c.Len(a); n != 100 {
			t.Fatalf("%s: sequence a has %d tokens", tc.name, n)
		}
		if n, _ := c.Len(b); n != 0 {
			t.Fatalf("%s: sequence b has %d tokens", tc.name, n)
		}
		if u := c.Usage(); u.FreePages != 1 { // 192 tokens = 3 pages, two of them a's
			t.Fatalf("%s: %d free pages", tc.name, u.FreePages)
		}
	}
	if err := c.Drop(a); err != nil {
		t.Fatal(err)
	}
	if err := c.Append([]sdpa.SeqID{b}, kv(192), kv(192)); err != nil {
		t.Errorf("a dropped sequence's pages are not reused: %v", err)
	}
	c.Close()
	if _, err := c.AddSequence(); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("AddSequence after Close: %v", err)
	}
	if err := c.Attention(out, nil, q, []sdpa.SeqID{b}, nil); !errors.Is(err, sdpa.ErrInvalid) {
		t.Errorf("Attention after Close: %v", err)
	}
}

// TestKVCacheNoAllocs: a decode step (append one token, attention) on the
// cpu device allocates nothing once its pages exist.
func TestKVCacheNoAllocs(t *testing.T) {
	dev, _ := sdpa.Open("cpu")
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 5))
	const hkv, g, d = 2, 4, 64
	c, _ := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 4096})
	s, _ := c.AddSequence()
	k := upload(t, dev, randLayout(rng, 1, hkv, 1, d, sdpa.BSHD))
	v := upload(t, dev, randLayout(rng, 1, hkv, 1, d, sdpa.BSHD))
	q := upload(t, dev, randLayout(rng, 1, hkv*g, 1, d, sdpa.BSHD))
	out, _ := dev.NewTensor(1, hkv*g, 1, d, sdpa.BSHD)
	lse, _ := dev.NewTensor(1, hkv*g, 1, 1, sdpa.BHSD)
	ids := []sdpa.SeqID{s}
	step := func() {
		if err := c.Append(ids, k, v); err != nil {
			t.Fatal(err)
		}
		if err := c.Attention(out, lse, q, ids, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 70 { // a second page, and warm scratch
		step()
	}
	if n := allocs.PerCall(50, func() {
		if err := c.Append(ids, k, v); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("an append allocates %v times", n)
	}
	if n := allocs.PerCall(50, step); n != 0 {
		t.Errorf("a decode step allocates %v times", n)
	}
}

// TestKVCacheConcurrent: attention on several goroutines while another
// appends to and drops other sequences (run with -race).
func TestKVCacheConcurrent(t *testing.T) {
	dev, _ := sdpa.Open("cpu")
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 6))
	const d = 32
	c, _ := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: d, MaxTokens: 64 * 40})
	s, _ := c.AddSequence()
	c.Append([]sdpa.SeqID{s}, upload(t, dev, randLayout(rng, 1, 1, 300, d, sdpa.BHSD)), upload(t, dev, randLayout(rng, 1, 1, 300, d, sdpa.BHSD)))
	q := randLayout(rng, 1, 2, 1, d, sdpa.BHSD)
	ref, _ := dev.NewTensor(1, 2, 1, d, sdpa.BHSD)
	if err := c.Attention(ref, nil, upload(t, dev, q), []sdpa.SeqID{s}, nil); err != nil {
		t.Fatal(err)
	}
	want := &sdpa.Tensor{Data: make([]float32, 2*d), B: 1, H: 2, S: 1, D: d}
	ref.Download(want)
	kx := upload(t, dev, randLayout(rng, 1, 1, 10, d, sdpa.BHSD))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qd, _ := dev.Upload(q)
			out, _ := dev.NewTensor(1, 2, 1, d, sdpa.BHSD)
			got := &sdpa.Tensor{Data: make([]float32, 2*d), B: 1, H: 2, S: 1, D: d}
			for range 50 {
				if err := c.Attention(out, nil, qd, []sdpa.SeqID{s}, nil); err != nil {
					errs <- err
					return
				}
				out.Download(got)
				if i := sameBits(got.Data, want.Data); i >= 0 {
					errs <- fmt.Errorf("element %d changed under concurrent appends", i)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			o, _ := c.AddSequence()
			if err := c.Append([]sdpa.SeqID{o}, kx, kx); err != nil {
				errs <- err
				return
			}
			c.Drop(o)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDevice: device tensors round-trip, and device calls compute what the
// host calls compute, bit for bit.
func TestDevice(t *testing.T) {
	if _, err := sdpa.Open("no-such-backend"); !errors.Is(err, sdpa.ErrUnknownBackend) {
		t.Errorf("unknown backend: %v", err)
	}
	if def, err := sdpa.Open(""); err != nil || def.Name() == "" {
		t.Fatalf("Open(\"\"): %v", err)
	}
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 8))
	q := randLayout(rng, 2, 4, 33, 16, sdpa.BSHD)
	k := randLayout(rng, 2, 2, 40, 16, sdpa.BSHD)
	v := randLayout(rng, 2, 2, 40, 16, sdpa.BSHD)
	qd, kd, vd := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
	back := &sdpa.Tensor{Data: make([]float32, len(q.Data)), B: 2, H: 4, S: 33, D: 16, Layout: sdpa.BSHD}
	if err := qd.Download(back); err != nil || sameBits(back.Data, q.Data) >= 0 {
		t.Fatalf("round trip: %v", err)
	}
	out, _ := dev.NewTensor(2, 4, 33, 16, sdpa.BSHD)
	lse, _ := dev.NewTensor(2, 4, 33, 1, sdpa.BHSD)
	for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
		opts := &sdpa.Options{Mask: sdpa.CausalLowerRight, Precision: prec}
		if err := dev.Attention(out, lse, qd, kd, vd, opts); err != nil {
			t.Fatal(err)
		}
		want, wantLSE := poisoned(2, 4, 33, 16)
		want.Layout = sdpa.BSHD
		if err := sdpa.AttentionInto(want, wantLSE, q, k, v, &sdpa.Options{Mask: sdpa.CausalLowerRight, Precision: prec, Backend: "cpu"}); err != nil {
			t.Fatal(err)
		}
		got, gotLSE := poisoned(2, 4, 33, 16)
		got.Layout = sdpa.BSHD
		out.Download(got)
		lse.Download(&sdpa.Tensor{Data: gotLSE, B: 2, H: 4, S: 33, D: 1})
		if sameBits(got.Data, want.Data) >= 0 || sameBits(gotLSE, wantLSE) >= 0 {
			t.Errorf("%v: device attention differs from AttentionInto", prec)
		}
	}
	// Quantized on the device: the host's codes and scales, and the FP8 path.
	q8, _ := dev.Quantize(qd)
	k8, _ := dev.Quantize(kd)
	v8, _ := dev.Quantize(vd)
	hq, _ := sdpa.Quantize(q)
	deq, _ := hq.Dequantize()
	if err := q8.Download(back); err != nil || sameBits(back.Data, deq.Data) >= 0 {
		t.Errorf("device quantization differs from the host's: %v", err)
	}
	if err := dev.Attention(out, nil, q8, k8, v8, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"mixed precisions", func() error { return dev.Attention(out, nil, q8, kd, vd, nil) }},
		{"fp8 output", func() error { return dev.Attention(q8, nil, q8, k8, v8, nil) }},
		{"lse shape", func() error { return dev.Attention(out, out, qd, kd, vd, nil) }},
		{"copy shape", func() error { return qd.CopyFrom(k) }},
		{"copy into fp8", func() error { return q8.CopyFrom(q) }},
		{"download shape", func() error { return kd.Download(back) }},
		{"bad dims", func() error { _, err := dev.NewTensor(1, 0, 1, 1, sdpa.BHSD); return err }},
		{"double free", func() error { x, _ := dev.Upload(q); x.Free(); return x.Free() }},
		{"use after free", func() error { x, _ := dev.Upload(q); x.Free(); return x.Download(back) }},
		{"zero tensor download", func() error { return (&sdpa.DeviceTensor{}).Download(back) }},
		{"zero tensor copy", func() error { return (&sdpa.DeviceTensor{}).CopyFrom(q) }},
		{"zero tensor attention", func() error { return dev.Attention(out, nil, &sdpa.DeviceTensor{}, kd, vd, nil) }},
		{"zero cache", func() error { return (&sdpa.KVCache{}).Append([]sdpa.SeqID{0}, kd, vd) }},
	} {
		if err := tc.call(); !errors.Is(err, sdpa.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
}

func ExampleKVCache() {
	dev, err := sdpa.Open("cpu") // "cuda" on a GPU host (build with -tags cuda)
	if err != nil {
		panic(err)
	}
	// One KV head of dimension 2; the query head sees keys whose first
	// channel is the token's position.
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: 2, MaxTokens: 1024})
	if err != nil {
		panic(err)
	}
	seq, _ := cache.AddSequence()
	q, _ := dev.Upload(&sdpa.Tensor{Data: []float32{1, 0}, B: 1, H: 1, S: 1, D: 2})
	out, _ := dev.NewTensor(1, 1, 1, 2, sdpa.BHSD)
	k, _ := dev.NewTensor(1, 1, 1, 2, sdpa.BHSD)
	v, _ := dev.NewTensor(1, 1, 1, 2, sdpa.BHSD)
	res := &sdpa.Tensor{Data: make([]float32, 2), B: 1, H: 1, S: 1, D: 2}
	for pos := range 3 {
		// The new token's key and value, quantized into the cache once.
		k.CopyFrom(&sdpa.Tensor{Data: []float32{float32(pos), 0}, B: 1, H: 1, S: 1, D: 2})
		v.CopyFrom(&sdpa.Tensor{Data: []float32{float32(pos), 1}, B: 1, H: 1, S: 1, D: 2})
		if err := cache.Append([]sdpa.SeqID{seq}, k, v); err != nil {
			panic(err)
		}
		if err := cache.Attention(out, nil, q, []sdpa.SeqID{seq}, &sdpa.Options{Scale: 1}); err != nil {
			panic(err)
		}
		out.Download(res)
		n, _ := cache.Len(seq)
		fmt.Printf("tokens %d: out %.4f\n", n, res.Data)
	}
	// Output:
	// tokens 1: out [0.0000 1.0000]
	// tokens 2: out [0.7311 1.0000]
	// tokens 3: out [1.5752 1.0000]
}

// TestMemoryLimitCPU: the cpu device accounts for the tensors and caches
// it holds in host memory and refuses, with ErrOutOfMemory and before
// allocating, what would pass its bound; n <= 0 restores the default bound
// (the machine's memory), which still refuses an impossible size.
func TestMemoryLimitCPU(t *testing.T) {
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if n := dev.MemoryHeld(); n != 0 {
		t.Errorf("a new cpu device holds %d bytes", n)
	}
	x, err := dev.NewTensor(1, 2, 16, 64, sdpa.BHSD)
	if err != nil {
		t.Fatal(err)
	}
	if n := dev.MemoryHeld(); n != 4*2*16*64 {
		t.Errorf("one [1][2][16][64] tensor: %d bytes held, want %d", n, 4*2*16*64)
	}
	if err := dev.SetMemoryLimit(dev.MemoryHeld() + 100); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"NewTensor", func() error { _, err := dev.NewTensor(1, 1, 1, 26, sdpa.BHSD); return err }},
		{"Upload", func() error {
			_, err := dev.Upload(&sdpa.Tensor{Data: make([]float32, 32), B: 1, H: 1, S: 1, D: 32})
			return err
		}},
		{"Quantize", func() error { _, err := dev.Quantize(x); return err }},
		{"NewKVCache", func() error {
			_, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: 64, MaxTokens: 64})
			return err
		}},
	} {
		if err := c.call(); !errors.Is(err, sdpa.ErrOutOfMemory) {
			t.Errorf("%s past the bound: %v, want ErrOutOfMemory", c.name, err)
		}
	}
	if _, err := dev.NewTensor(1, 1, 1, 25, sdpa.BHSD); err != nil {
		t.Errorf("NewTensor of 100 bytes, at the bound: %v", err)
	}
	if err := dev.SetMemoryLimit(0); err != nil {
		t.Fatal(err)
	}
	cache, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 2, HeadDim: 64, MaxTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	before := dev.MemoryHeld()
	if err := errors.Join(cache.Close(), x.Free()); err != nil {
		t.Fatal(err)
	}
	if got, want := before-dev.MemoryHeld(), int64(2*128*2*64+2*2*2*4+4*2*16*64); got != want {
		t.Errorf("Close and Free released %d bytes, want %d", got, want)
	}
	if _, err := dev.NewTensor(1, 64, 1<<30, 256, sdpa.BHSD); !errors.Is(err, sdpa.ErrOutOfMemory) {
		t.Errorf("a 64 TiB tensor under the default bound: %v, want ErrOutOfMemory", err)
	}
	var nilDev *sdpa.Device
	if err := nilDev.SetMemoryLimit(1); !errors.Is(err, sdpa.ErrInvalid) || nilDev.MemoryHeld() != 0 {
		t.Errorf("nil device: %v, want ErrInvalid", err)
	}
}

// TestOpenUnavailable: a backend this build cannot run is ErrUnsupported at
// Open (cuda without -tags cuda); with the tag on a GPU host the cuda device
// opens, and has a paged cache.
func TestOpenUnavailable(t *testing.T) {
	names := sdpa.Backends()
	for _, n := range names {
		if n != "cuda" {
			continue
		}
		dev, err := sdpa.Open(n)
		if err != nil {
			if !errors.Is(err, sdpa.ErrUnsupported) {
				t.Errorf("Open(cuda): %v, want ErrUnsupported", err)
			}
			return
		}
		c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: 1, HeadDim: 64, MaxTokens: 64})
		if err != nil {
			t.Fatalf("cuda NewKVCache: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		return
	}
	t.Skipf("no cuda backend registered (backends %v)", names)
}
