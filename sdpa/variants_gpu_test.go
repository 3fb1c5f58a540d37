//go:build cuda

package sdpa_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/oracle"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestKVCacheForkTruncateGPU and TestKVCacheForkGrowthGPU: the cuda cache's
// Fork, Truncate and copy-on-write (device-to-device page copies) held to
// the model, as on the cpu.
func TestKVCacheForkTruncateGPU(t *testing.T) { testForkTruncate(t, "cuda") }

func TestKVCacheForkGrowthGPU(t *testing.T) { testForkGrowth(t, "cuda") }

// gpuVariantOptions are variantOptions and windows that end inside the
// tiles of the tiled Hopper kernel (128 or 64 keys) under both alignments,
// one with a softcap.
var gpuVariantOptions = append(variantOptions[:len(variantOptions):len(variantOptions)], []struct {
	name    string
	mask    sdpa.Mask
	window  int
	softcap float32
	sinks   bool
}{
	{"wide-window-sinks", sdpa.CausalLowerRight, 200, 0, true},
	{"wide-window-softcap-upper-left", sdpa.CausalUpperLeft, 300, 30, false},
}...)

// TestVariantsGPU: the sliding window, the softcap and the sinks on the
// cuda device. Where the Hopper or the Ada kernel runs (the one "cuda"
// picks), Device.Attention on FP8 device
// tensors and on float32 device tensors (quantized on the device), a graph
// of it replayed, and sdpa.AttentionLSE with Backend "cuda" give what the
// oracle gives on the same codes within the FP8 MMA tier
// (sdpatest.FP8MMATolerance) and, in root mean square, within its RMS tier
// (sdpatest.FP8MMARMSTolerance), outputs poisoned first: in one tile (D 64,
// 70 keys) and tiled (D 64, 128 and 256, and D 128 on keys that grow along
// the row, whose maxima the tiles rescale), with windows that skip whole
// tiles and windows whose edges fall inside them. On a GPU without them
// (Ampere) every such call is ErrUnsupported, with nothing held. The
// kernel mutant s9-rescale-floored-sdpa fails it.
func TestVariantsGPU(t *testing.T) {
	dev, err := sdpa.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 68))
	for _, cs := range []struct {
		name                   string
		b, hq, hkv, sq, sk, hd int
		ramp                   float64 // sdpatest.RampKeys
	}{
		{"one-tile", 1, 4, 2, 33, 70, 64, 0},
		{"tiled-d64-gqa", 2, 8, 2, 256, 520, 64, 0},
		{"tiled-d128", 1, 4, 2, 300, 700, 128, 0},
		{"tiled-d256", 1, 2, 1, 200, 450, 256, 0},
		{"tiled-d128-rising-keys", 1, 2, 2, 130, 700, 128, 8},
	} {
		q, k, v := randTensor(rng, cs.b, cs.hq, cs.sq, cs.hd), randTensor(rng, cs.b, cs.hkv, cs.sk, cs.hd), randTensor(rng, cs.b, cs.hkv, cs.sk, cs.hd)
		sdpatest.RampKeys(k.Data, backend.Shape{B: cs.b, Hq: cs.hq, Hkv: cs.hkv, Sq: cs.sq, Sk: cs.sk, D: cs.hd}, cs.ramp)
		_, herr := sdpa.Attention(q, k, v, &sdpa.Options{Backend: "cuda/sm90", Precision: sdpa.FP8E4M3})
		_, aerr := sdpa.Attention(q, k, v, &sdpa.Options{Backend: "cuda/sm89", Precision: sdpa.FP8E4M3})
		hopper := herr == nil || aerr == nil // a kernel with the variants
		qd, kd, vd := upload(t, dev, q), upload(t, dev, k), upload(t, dev, v)
		var q8, k8, v8 *sdpa.DeviceTensor
		for _, x := range []struct {
			dst **sdpa.DeviceTensor
			src *sdpa.DeviceTensor
		}{{&q8, qd}, {&k8, kd}, {&v8, vd}} {
			if *x.dst, err = dev.Quantize(x.src); err != nil {
				t.Fatal(err)
			}
		}
		out, _ := dev.NewTensor(cs.b, cs.hq, cs.sq, cs.hd, sdpa.BHSD)
		lse, _ := dev.NewTensor(cs.b, cs.hq, cs.sq, 1, sdpa.BHSD)
		sinks := make([]float32, cs.hq)
		for i := range sinks {
			sinks[i] = float32(rng.NormFloat64() * 2)
		}
		for _, vo := range gpuVariantOptions {
			name := cs.name + "/" + vo.name
			opts := &sdpa.Options{Mask: vo.mask, Precision: sdpa.FP8E4M3, SlidingWindow: vo.window, Softcap: vo.softcap}
			if vo.sinks {
				opts.Sinks = sinks
			}
			host := *opts
			host.Backend = "cuda"
			if !hopper {
				held := dev.MemoryHeld()
				if err := dev.Attention(out, nil, q8, k8, v8, opts); !errors.Is(err, sdpa.ErrUnsupported) {
					t.Errorf("%s: Device.Attention: %v, want ErrUnsupported (no Hopper or Ada kernel: %v)", name, err, errors.Join(herr, aerr))
				}
				if got := dev.MemoryHeld(); got != held {
					t.Errorf("%s: the refused call left %d bytes held, %d before", name, got, held)
				}
				if _, err := sdpa.Attention(q, k, v, &host); !errors.Is(err, sdpa.ErrUnsupported) {
					t.Errorf("%s: Backend cuda: %v, want ErrUnsupported", name, err)
				}
				continue
			}
			p := variantProblem(t, q, k, v, opts)
			wantOut, wantLSE := oracle.Naive(p)
			tol, ltol, rtol := sdpatest.FP8MMATolerance(p), sdpatest.FP8MMALSETolerance(p), sdpatest.FP8MMARMSTolerance(p)
			check := func(call string, got, gotLSE []float32) {
				t.Helper()
				st := sdpatest.Compare(got, wantOut, tol)
				if st.Beyond > 0 {
					t.Errorf("%s %s: %d outputs beyond tolerance (%s), first at %d: %g, want %g", name, call, st.Beyond, tol.Why, st.FirstBad, got[st.FirstBad], wantOut[st.FirstBad])
				}
				if err := rtol.Check(st); err != nil {
					t.Errorf("%s %s: %v", name, call, err)
				}
				if st := sdpatest.Compare(gotLSE, wantLSE, ltol); st.Beyond > 0 {
					t.Errorf("%s %s: %d LSEs beyond tolerance (%s), first at %d: %g, want %g", name, call, st.Beyond, ltol.Why, st.FirstBad, gotLSE[st.FirstBad], wantLSE[st.FirstBad])
				}
			}
			download := func() ([]float32, []float32) {
				t.Helper()
				ho, hl := poisoned(cs.b, cs.hq, cs.sq, cs.hd)
				hlse := &sdpa.Tensor{Data: hl, B: cs.b, H: cs.hq, S: cs.sq, D: 1}
				if err := errors.Join(out.Download(ho), lse.Download(hlse)); err != nil {
					t.Fatal(err)
				}
				return ho.Data, hl
			}
			// poison fills the device outputs with the poison pattern first.
			poison := func() {
				t.Helper()
				ho, hl := poisoned(cs.b, cs.hq, cs.sq, cs.hd)
				if err := errors.Join(out.CopyFrom(ho), lse.CopyFrom(&sdpa.Tensor{Data: hl, B: cs.b, H: cs.hq, S: cs.sq, D: 1})); err != nil {
					t.Fatal(err)
				}
			}
			for _, in := range []struct {
				call    string
				q, k, v *sdpa.DeviceTensor
			}{{"FP8 tensors", q8, k8, v8}, {"float32 tensors", qd, kd, vd}} {
				poison()
				if err := dev.Attention(out, lse, in.q, in.k, in.v, opts); err != nil {
					t.Fatalf("%s Device.Attention on %s: %v", name, in.call, err)
				}
				o, l := download()
				check("Device.Attention on "+in.call, o, l)
			}
			poison()
			g, err := dev.Capture(func() error { return dev.Attention(out, lse, q8, k8, v8, opts) })
			if err != nil {
				t.Fatalf("%s: capture: %v", name, err)
			}
			negate := func() {
				for i := range opts.Sinks {
					opts.Sinks[i] = -opts.Sinks[i]
				}
			}
			negate() // the graph replays the sinks of its capture
			if err := g.Replay(); err != nil {
				t.Fatalf("%s: replay: %v", name, err)
			}
			o, l := download()
			check("graph replay", o, l)
			negate()
			if err := g.Close(); err != nil {
				t.Fatal(err)
			}
			ho, hl, err := sdpa.AttentionLSE(q, k, v, &host)
			if err != nil {
				t.Fatalf("%s Backend cuda: %v", name, err)
			}
			check("AttentionLSE with Backend cuda", ho.Data, hl)
		}
		for _, x := range []*sdpa.DeviceTensor{qd, kd, vd, q8, k8, v8, out, lse} {
			if err := x.Free(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestVariantsKVCacheGPU: the cuda cache's attention with each variant,
// held to the oracle within the float32 tier as the cpu cache's is.
func TestVariantsKVCacheGPU(t *testing.T) { testVariantsKVCache(t, "cuda") }
