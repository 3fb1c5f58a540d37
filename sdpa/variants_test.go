package sdpa_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// variantOptions are the variant settings every call is tried with.
var variantOptions = []struct {
	name    string
	mask    sdpa.Mask
	window  int
	softcap float32
	sinks   bool
}{
	{"window", sdpa.CausalLowerRight, 24, 0, false},
	{"window-upper-left", sdpa.CausalUpperLeft, 10, 0, false},
	{"softcap", sdpa.NoMask, 0, 5, false},
	{"sinks", sdpa.NoMask, 0, 0, true},
	{"all", sdpa.CausalLowerRight, 24, 8, true},
}

// want computes the expected output and LSE of a call on q, k, v with the
// oracle, on a problem built here (FP8: on sdpa.Quantize's codes, which
// every FP8 call quantizes alike), with its tolerances: float32's, or,
// for an FP8 call that names no backend where a cuda device opens (the
// choice then takes it to the GPU's kernels, whose products run on FP8
// tensor cores), the FP8 MMA tiers.
func want(t *testing.T, q, k, v *sdpa.Tensor, opts *sdpa.Options) (out, lse []float64, tol, ltol sdpatest.Tolerance) {
	t.Helper()
	p := variantProblem(t, q, k, v, opts)
	out, lse = oracle.Naive(p)
	if opts.Precision == sdpa.FP8E4M3 && opts.Backend == "" {
		if _, err := sdpa.Open("cuda"); err == nil {
			return out, lse, sdpatest.FP8MMATolerance(p), sdpatest.FP8MMALSETolerance(p)
		}
	}
	return out, lse, sdpatest.FP32Tolerance(p), sdpatest.LSETolerance(p)
}

// variantProblem is the problem of a call on q, k, v with opts, as the
// oracle takes it (FP8: on sdpa.Quantize's codes).
func variantProblem(t *testing.T, q, k, v *sdpa.Tensor, opts *sdpa.Options) *backend.Problem {
	t.Helper()
	p := &backend.Problem{Shape: backend.Shape{B: q.B, Hq: q.H, Hkv: k.H, Sq: q.S, Sk: k.S, D: q.D},
		Scale: float32(1 / math.Sqrt(float64(q.D))), Mask: opts.Mask, Precision: opts.Precision, Layout: q.Layout,
		Variants: backend.Variants{SlidingWindow: opts.SlidingWindow, Softcap: opts.Softcap, Sinks: opts.Sinks}}
	if opts.Precision == sdpa.FP8E4M3 {
		var qs [3]*sdpa.QuantizedTensor
		for i, x := range []*sdpa.Tensor{q, k, v} {
			var err error
			if qs[i], err = sdpa.Quantize(x); err != nil {
				t.Fatal(err)
			}
		}
		p.Q8, p.K8, p.V8 = qs[0].Data, qs[1].Data, qs[2].Data
		p.QScale, p.KScale, p.VScale = qs[0].Scales, qs[1].Scales, qs[2].Scales
	} else {
		p.Q, p.K, p.V = q.Data, k.Data, v.Data
	}
	return p
}

// TestVariantsEveryCall: the sliding window, softcap and sinks reach the
// backend through Attention, AttentionLSE, AttentionInto,
// AttentionQuantized and the cpu device's Attention, in both precisions,
// on the backend "" picks and on "cpu" and "reference" by name, and give
// what the oracle gives.
func TestVariantsEveryCall(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 57))
	const b, hq, hkv, sq, sk, d = 2, 4, 2, 37, 80, 64
	q, k, v := randTensor(rng, b, hq, sq, d), randTensor(rng, b, hkv, sk, d), randTensor(rng, b, hkv, sk, d)
	sinks := sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: sk})
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, vo := range variantOptions {
		for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
			name := fmt.Sprintf("%s/%v", vo.name, prec)
			opts := &sdpa.Options{Mask: vo.mask, Precision: prec, SlidingWindow: vo.window, Softcap: vo.softcap}
			if vo.sinks {
				opts.Sinks = sinks
			}
			// (The calls that name a CPU backend, and the cpu device's, are
			// held to the CPU's tiers, tolCPU, where "" may pick the GPU.)
			wantOut, wantLSE, tol, ltol := want(t, q, k, v, opts)
			cpuOpts := *opts
			cpuOpts.Backend = "cpu"
			_, _, tolCPU, ltolCPU := want(t, q, k, v, &cpuOpts)
			checkWith := func(call string, out, lse []float32, tol, ltol sdpatest.Tolerance) {
				t.Helper()
				if st := sdpatest.Compare(out, wantOut, tol); st.Beyond > 0 {
					t.Errorf("%s %s: %d outputs beyond tolerance (%s), first at %d: %g, want %g", name, call, st.Beyond, tol.Why, st.FirstBad, out[st.FirstBad], wantOut[st.FirstBad])
				}
				if lse == nil {
					return
				}
				if st := sdpatest.Compare(lse, wantLSE, ltol); st.Beyond > 0 {
					t.Errorf("%s %s: %d LSEs beyond tolerance, first at %d: %g, want %g", name, call, st.Beyond, st.FirstBad, lse[st.FirstBad], wantLSE[st.FirstBad])
				}
			}
			check := func(call string, out, lse []float32) {
				t.Helper()
				checkWith(call, out, lse, tol, ltol)
			}
			got, err := sdpa.Attention(q, k, v, opts)
			if err != nil {
				t.Fatalf("%s Attention: %v", name, err)
			}
			check("Attention", got.Data, nil)
			got, lse, err := sdpa.AttentionLSE(q, k, v, opts)
			if err != nil {
				t.Fatalf("%s AttentionLSE: %v", name, err)
			}
			check("AttentionLSE", got.Data, lse)
			out, olse := poisoned(b, hq, sq, d)
			if err := sdpa.AttentionInto(out, olse, q, k, v, opts); err != nil {
				t.Fatalf("%s AttentionInto: %v", name, err)
			}
			check("AttentionInto", out.Data, olse)
			if prec == sdpa.FP8E4M3 {
				qq, _ := sdpa.Quantize(q)
				qk, _ := sdpa.Quantize(k)
				qv, _ := sdpa.Quantize(v)
				got, lse, err := sdpa.AttentionQuantized(qq, qk, qv, opts)
				if err != nil {
					t.Fatalf("%s AttentionQuantized: %v", name, err)
				}
				check("AttentionQuantized", got.Data, lse)
			}
			for _, be := range []string{"cpu", "reference"} {
				named := *opts
				named.Backend = be
				got, lse, err := sdpa.AttentionLSE(q, k, v, &named)
				if err != nil {
					t.Fatalf("%s on backend %s: %v", name, be, err)
				}
				checkWith("backend "+be, got.Data, lse, tolCPU, ltolCPU)
			}
			dq, dk, dv := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
			dout, _ := dev.NewTensor(b, hq, sq, d, sdpa.BHSD)
			dlse, _ := dev.NewTensor(b, hq, sq, 1, sdpa.BHSD)
			if err := dev.Attention(dout, dlse, dq, dk, dv, opts); err != nil {
				t.Fatalf("%s on the cpu device: %v", name, err)
			}
			hout, hlse := &sdpa.Tensor{Data: make([]float32, b*hq*sq*d), B: b, H: hq, S: sq, D: d}, &sdpa.Tensor{Data: make([]float32, b*hq*sq), B: b, H: hq, S: sq, D: 1}
			if err := errors.Join(dout.Download(hout), dlse.Download(hlse)); err != nil {
				t.Fatal(err)
			}
			checkWith("Device.Attention", hout.Data, hlse.Data, tolCPU, ltolCPU)
			for _, x := range []*sdpa.DeviceTensor{dq, dk, dv, dout, dlse} {
				x.Free()
			}
		}
	}
}

// TestVariantsVarlen: the varlen call applies the window under each
// sequence's own causal alignment, and the sinks and softcap to every
// sequence; a sequence with queries and no keys gets zeros and -Inf.
func TestVariantsVarlen(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 58))
	const hq, hkv, d = 4, 2, 64
	cuQ, cuK := []int{0, 5, 12, 40}, []int{0, 40, 40, 100}
	bshd := func(h, s int) *sdpa.Tensor {
		x := randTensor(rng, 1, h, s, d)
		x.Layout = sdpa.BSHD
		return x
	}
	q, k, v := bshd(hq, 40), bshd(hkv, 100), bshd(hkv, 100)
	sinks := sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: 40})
	for _, vo := range variantOptions {
		for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
			opts := &sdpa.Options{Mask: vo.mask, Precision: prec, SlidingWindow: vo.window, Softcap: vo.softcap}
			if vo.sinks {
				opts.Sinks = sinks
			}
			out, lse := poisoned(1, hq, 40, d)
			out.Layout = sdpa.BSHD
			if err := sdpa.AttentionVarlenInto(out, lse, q, k, v, cuQ, cuK, opts); err != nil {
				t.Fatalf("%s/%v: %v", vo.name, prec, err)
			}
			for i := range len(cuQ) - 1 {
				q0, q1, k0, k1 := cuQ[i], cuQ[i+1], cuK[i], cuK[i+1]
				rows := func(x *sdpa.Tensor, h, s0, s1 int) *sdpa.Tensor {
					return &sdpa.Tensor{Data: x.Data[s0*h*d : s1*h*d], B: 1, H: h, S: s1 - s0, D: d, Layout: sdpa.BSHD}
				}
				gotOut := out.Data[q0*hq*d : q1*hq*d]
				gotLSE := make([]float32, 0, hq*(q1-q0))
				for h := range hq {
					gotLSE = append(gotLSE, lse[h*40+q0:h*40+q1]...)
				}
				if k0 == k1 {
					for j, x := range gotOut {
						if x != 0 {
							t.Fatalf("%s/%v sequence %d has no keys: output %d is %g", vo.name, prec, i, j, x)
						}
					}
					for _, l := range gotLSE {
						if !math.IsInf(float64(l), -1) {
							t.Fatalf("%s/%v sequence %d has no keys: LSE %g", vo.name, prec, i, l)
						}
					}
					continue
				}
				wantOut, wantLSE, tol, ltol := want(t, rows(q, hq, q0, q1), rows(k, hkv, k0, k1), rows(v, hkv, k0, k1), opts)
				if st := sdpatest.Compare(gotOut, wantOut, tol); st.Beyond > 0 {
					t.Errorf("%s/%v sequence %d: %d outputs beyond tolerance, first at %d: %g, want %g", vo.name, prec, i, st.Beyond, st.FirstBad, gotOut[st.FirstBad], wantOut[st.FirstBad])
				}
				if st := sdpatest.Compare(gotLSE, wantLSE, ltol); st.Beyond > 0 {
					t.Errorf("%s/%v sequence %d: %d LSEs beyond tolerance", vo.name, prec, i, st.Beyond)
				}
			}
		}
	}
}

// TestVariantsInvalid: every malformed variant is ErrInvalid from every
// call, before anything is written.
func TestVariantsInvalid(t *testing.T) {
	rng := rand.New(rand.NewPCG(sdpatest.Seed(), 59))
	const hq, hkv, d = 4, 2, 32
	q, k, v := randTensor(rng, 1, hq, 9, d), randTensor(rng, 1, hkv, 20, d), randTensor(rng, 1, hkv, 20, d)
	nan := float32(math.NaN())
	bad := []struct {
		name string
		o    sdpa.Options
	}{
		{"window without a mask", sdpa.Options{SlidingWindow: 4}},
		{"negative window", sdpa.Options{Mask: sdpa.CausalLowerRight, SlidingWindow: -2}},
		{"negative softcap", sdpa.Options{Softcap: -1}},
		{"NaN softcap", sdpa.Options{Softcap: nan}},
		{"infinite softcap", sdpa.Options{Softcap: float32(math.Inf(1))}},
		{"sinks for another head count", sdpa.Options{Sinks: []float32{1, 2}}},
		{"empty sinks", sdpa.Options{Sinks: []float32{}}},
		{"NaN sink", sdpa.Options{Sinks: []float32{0, 0, nan, 0}}},
		{"SmoothK with a softcap", sdpa.Options{SmoothK: true, Softcap: 3}},
		{"SmoothK with sinks", sdpa.Options{SmoothK: true, Sinks: []float32{0, 0, 0, 0}}},
	}
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := kv.AddSequence()
	dk, _ := dev.Upload(&sdpa.Tensor{Data: k.Data, B: 1, H: hkv, S: 20, D: d})
	dv, _ := dev.Upload(&sdpa.Tensor{Data: v.Data, B: 1, H: hkv, S: 20, D: d})
	if err := kv.Append([]sdpa.SeqID{id}, dk, dv); err != nil {
		t.Fatal(err)
	}
	dq, _ := dev.Upload(q)
	dout, _ := dev.NewTensor(1, hq, 9, d, sdpa.BHSD)
	for _, c := range bad {
		for _, prec := range []sdpa.Precision{sdpa.FP32, sdpa.FP8E4M3} {
			o := c.o
			o.Precision = prec
			name := fmt.Sprintf("%s/%v", c.name, prec)
			out, lse := poisoned(1, hq, 9, d)
			calls := map[string]error{}
			_, calls["Attention"] = sdpa.Attention(q, k, v, &o)
			calls["AttentionInto"] = sdpa.AttentionInto(out, lse, q, k, v, &o)
			if sameBits(out.Data, poisonOf(len(out.Data))) >= 0 || sameBits(lse, poisonOf(len(lse))) >= 0 {
				t.Errorf("%s: AttentionInto wrote before failing", name)
			}
			vq, vk, vv := *q, *k, *v
			vq.Layout, vk.Layout, vv.Layout = sdpa.BSHD, sdpa.BSHD, sdpa.BSHD
			vout := *out
			vout.Layout = sdpa.BSHD
			calls["AttentionVarlenInto"] = sdpa.AttentionVarlenInto(&vout, nil, &vq, &vk, &vv, []int{0, 9}, []int{0, 20}, &o)
			calls["Device.Attention"] = dev.Attention(dout, nil, dq, dk, dv, &o)
			if !o.SmoothK { // the cache takes no SmoothK at all
				calls["KVCache.Attention"] = kv.Attention(dout, nil, dq, []sdpa.SeqID{id}, &o)
			}
			for call, err := range calls {
				if !errors.Is(err, sdpa.ErrInvalid) {
					t.Errorf("%s: %s: %v, want ErrInvalid", name, call, err)
				}
			}
		}
	}
}

// testVariantsKVCache: KVCache.Attention with each variant gives exact
// attention within the float32 tier: keys and values on a grid of halves
// in [-2, 2], which every power-of-two page scale the cache can choose
// holds exactly in E4M3, so that the cache computes on the values
// themselves. Three sequences, one of them empty, decode and a chunk.
func testVariantsKVCache(t *testing.T, devName string) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 69))
	dev, err := sdpa.Open(devName)
	if err != nil {
		t.Fatal(err)
	}
	const hkv, hq, d = 2, 4, 64
	lens := []int{300, 0, 77}
	c, err := dev.NewKVCache(sdpa.KVCacheConfig{KVHeads: hkv, HeadDim: d, MaxTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	grid := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.IntN(9)-4) / 2
		}
		return x
	}
	var ids []sdpa.SeqID
	var ks, vs []*sdpa.Tensor
	for _, n := range lens {
		id, _ := c.AddSequence()
		ids = append(ids, id)
		k := &sdpa.Tensor{Data: grid(hkv * max(n, 1) * d), B: 1, H: hkv, S: max(n, 1), D: d}
		v := &sdpa.Tensor{Data: grid(hkv * max(n, 1) * d), B: 1, H: hkv, S: max(n, 1), D: d}
		ks, vs = append(ks, k), append(vs, v)
		if n > 0 {
			if err := c.Append([]sdpa.SeqID{id}, upload(t, dev, k), upload(t, dev, v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	sinks := sdpatest.RandomSinks(rng, backend.Shape{Hq: hq, Sk: 100})
	for _, sq := range []int{1, 9} {
		q := randTensor(rng, len(lens), hq, sq, d)
		dq := upload(t, dev, q)
		dout, _ := dev.NewTensor(len(lens), hq, sq, d, sdpa.BHSD)
		dlse, _ := dev.NewTensor(len(lens), hq, sq, 1, sdpa.BHSD)
		for _, vo := range variantOptions {
			opts := &sdpa.Options{Mask: vo.mask, SlidingWindow: vo.window, Softcap: vo.softcap}
			if opts.Mask == sdpa.CausalUpperLeft { // a cache aligns its queries lower-right
				opts.Mask = sdpa.CausalLowerRight
			}
			if vo.sinks {
				opts.Sinks = sinks
			}
			if err := c.Attention(dout, dlse, dq, ids, opts); err != nil {
				t.Fatalf("%s Sq %d: %v", vo.name, sq, err)
			}
			out := &sdpa.Tensor{Data: make([]float32, len(lens)*hq*sq*d), B: len(lens), H: hq, S: sq, D: d}
			lse := &sdpa.Tensor{Data: make([]float32, len(lens)*hq*sq), B: len(lens), H: hq, S: sq, D: 1}
			if err := errors.Join(dout.Download(out), dlse.Download(lse)); err != nil {
				t.Fatal(err)
			}
			for b, n := range lens {
				gotOut, gotLSE := out.Data[b*hq*sq*d:(b+1)*hq*sq*d], lse.Data[b*hq*sq:(b+1)*hq*sq]
				if n == 0 {
					for i := range gotLSE {
						if !math.IsInf(float64(gotLSE[i]), -1) || slices.ContainsFunc(gotOut, func(x float32) bool { return x != 0 }) {
							t.Fatalf("%s Sq %d: the empty sequence has LSE %g or a nonzero output", vo.name, sq, gotLSE[i])
						}
					}
					continue
				}
				p := &backend.Problem{Shape: backend.Shape{B: 1, Hq: hq, Hkv: hkv, Sq: sq, Sk: n, D: d}, Scale: 0.125, Mask: opts.Mask,
					Variants: backend.Variants{SlidingWindow: opts.SlidingWindow, Softcap: opts.Softcap, Sinks: opts.Sinks},
					Q:        q.Data[b*hq*sq*d : (b+1)*hq*sq*d], K: ks[b].Data, V: vs[b].Data}
				want, wantLSE := oracle.Naive(p)
				if st := sdpatest.Compare(gotOut, want, sdpatest.FP32Tolerance(p)); st.Beyond > 0 {
					t.Errorf("%s Sq %d sequence %d: %d outputs beyond tolerance, first at %d: %g, want %g", vo.name, sq, b, st.Beyond, st.FirstBad, gotOut[st.FirstBad], want[st.FirstBad])
				}
				if st := sdpatest.Compare(gotLSE, wantLSE, sdpatest.LSETolerance(p)); st.Beyond > 0 {
					t.Errorf("%s Sq %d sequence %d: %d LSEs beyond tolerance, first at %d: %g, want %g", vo.name, sq, b, st.Beyond, st.FirstBad, gotLSE[st.FirstBad], wantLSE[st.FirstBad])
				}
			}
		}
	}
}

func TestVariantsKVCache(t *testing.T) { testVariantsKVCache(t, "cpu") }

func poisonOf(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(sdpatest.Poison)
	}
	return x
}
