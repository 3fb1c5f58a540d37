package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/sdpa"
	"github.com/fp8attn/fp8attn/sdpatest"
)

func TestParseSpecs(t *testing.T) {
	for _, c := range []struct {
		in     string
		shape  backend.Shape
		mask   backend.Mask
		layout backend.Layout
		bad    bool
	}{
		{in: "mission", shape: sdpatest.NamedShapes["mission"]},
		{in: "mission:causal:bshd", shape: sdpatest.NamedShapes["mission"], mask: backend.CausalUpperLeft, layout: backend.BSHD},
		{in: "4x32x8x4096x4096x128:causal-lr", shape: backend.Shape{B: 4, Hq: 32, Hkv: 8, Sq: 4096, Sk: 4096, D: 128}, mask: backend.CausalLowerRight},
		{in: "1x2x64x64x32:bhsd:none", shape: backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 64, Sk: 64, D: 32}},
		{in: "mission:sideways", bad: true},
		{in: "1x2x64", bad: true},
	} {
		sp, err := parseSpecs(c.in, backend.NoMask, backend.BHSD)
		if c.bad {
			if err == nil {
				t.Errorf("%q: no error", c.in)
			}
			continue
		}
		if err != nil || len(sp) != 1 {
			t.Errorf("%q: %v, %d specs", c.in, err, len(sp))
			continue
		}
		if sp[0].shape != c.shape || sp[0].mask != c.mask || sp[0].layout != c.layout || sp[0].name != c.in {
			t.Errorf("%q: got %+v", c.in, sp[0])
		}
	}
	// "prefill" is the shared table, each row spelled so that it parses back.
	sp, err := parseSpecs("prefill", backend.NoMask, backend.BHSD)
	if err != nil || len(sp) != len(sdpatest.PrefillShapes) {
		t.Fatalf("prefill: %v, %d specs", err, len(sp))
	}
	for i, ps := range sdpatest.PrefillShapes {
		back, err := parseSpecs(ps.Spec(), backend.NoMask, backend.BHSD)
		if err != nil || back[0].shape != ps.Shape || back[0].mask != ps.Mask || back[0].layout != ps.Layout || sp[i].name != ps.Spec() {
			t.Errorf("row %d %q: parses to %+v (%v)", i, ps.Spec(), back, err)
		}
	}
}

// TestPublicMode runs the public-call path on the cpu device (which
// replays a graph's calls on the host), and proves its check with broken
// calls: one that never runs (the output keeps its poison) and one with a
// wrong score factor. Under the FP8 tensor-core kernels' tiers (tierName
// "cuda/sm90"; the cpu device's FP8 path is exact arithmetic on the
// quantized inputs) a correct call passes both tiers, and one with the
// softmax scale 20% off, every element within the worst case, fails by
// its RMS error alone.
func TestPublicMode(t *testing.T) {
	dev, err := sdpa.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		attend attendFunc
		tiers  string // config.tierName
		pass   bool
	}{
		{"Device.Attention", nil, "", true},
		{"no call", func(*sdpa.Device, *sdpa.DeviceTensor, *sdpa.DeviceTensor, *sdpa.DeviceTensor, *sdpa.DeviceTensor, *sdpa.Options) error {
			return nil
		}, "", false},
		{"wrong scale", scaledBy(1.01), "", false},
		{"Device.Attention, FP8 tensor-core tiers", nil, "cuda/sm90", true},
		{"scale 20% off, FP8 tensor-core tiers", scaledBy(1.2), "cuda/sm90", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			specs, err := parseSpecs("1x4x2x48x80x32:causal-lr:bshd,small", backend.NoMask, backend.BHSD)
			if err != nil {
				t.Fatal(err)
			}
			cfg := config{prec: backend.FP8E4M3, check: true, iters: 2, attend: c.attend, graphCalls: 3, tierName: c.tiers}
			for _, sp := range specs {
				rs, err := cfg.runPublic(dev, sp)
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) != 2 || rs[0].Inputs != "fp8-tensors" || rs[1].Inputs != "float32-tensors" {
					t.Fatalf("%s: results %+v", sp.name, rs)
				}
				for _, r := range rs {
					if r.Pass != c.pass {
						t.Errorf("%s %s: pass %v, want %v (max_err %.3g)", sp.name, r.Inputs, r.Pass, c.pass, r.MaxErr)
					}
					// Under the FP8 tensor-core tiers every element is within
					// the worst case: the RMS tier alone decides.
					if c.tiers != "" && (r.FracBeyond != 0 || !(r.RMSErr > 0) || r.RMSTolerance == "") {
						t.Errorf("%s %s: beyond the worst case %.3g (want 0), rms_err %.3g (%s)", sp.name, r.Inputs, r.FracBeyond, r.RMSErr, r.RMSTolerance)
					}
					if !(r.GPUP50us > 0) || r.GPUP90us < r.GPUP50us || r.Layout != sp.layout.String() || r.Timing != "public call, graph replay" || r.CallsPerGraph != 3 {
						t.Errorf("%s %s: timing %+v", sp.name, r.Inputs, r)
					}
				}
			}
		})
	}
}

// scaledBy is a broken call: Device.Attention with the softmax scale
// multiplied by f.
func scaledBy(f float32) attendFunc {
	return func(d *sdpa.Device, out, q, k, v *sdpa.DeviceTensor, o *sdpa.Options) error {
		w := *o
		w.Scale *= f
		return d.Attention(out, nil, q, k, v, &w)
	}
}

// TestAccuracyMode: the accuracy mode passes the cpu device (whose FP8 path
// is input quantization alone) and fails a call with a wrong score factor.
func TestAccuracyMode(t *testing.T) {
	cases := []accuracyCase{
		{"S", backend.Shape{B: 1, Hq: 2, Hkv: 2, Sq: 64, Sk: 256, D: 32}, backend.CausalUpperLeft, 2, 1.5, "V=2+N(0,1)"},
	}
	// (Twice the scale: a tenth more left the error ratio of some seeds
	// under the limit, 1.475 against 1.5.)
	wrongScale := scaledBy(2)
	for _, c := range []struct {
		name   string
		attend attendFunc
		ok     bool
	}{{"Device.Attention", nil, true}, {"wrong scale", wrongScale, false}} {
		var out strings.Builder
		ok, err := config{attend: c.attend}.runAccuracy(&out, "cpu", cases)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.ok || !strings.Contains(out.String(), "ACCURACY S e_input=") {
			t.Errorf("%s: ok %v, want %v:\n%s", c.name, ok, c.ok, out.String())
		}
	}
	if _, err := (config{}).runAccuracy(io.Discard, "no-such-backend", cases); err == nil {
		t.Error("an unknown backend: no error")
	}
	// A call that fails is reported, and the other cases still run.
	refuse := func(*sdpa.Device, *sdpa.DeviceTensor, *sdpa.DeviceTensor, *sdpa.DeviceTensor, *sdpa.DeviceTensor, *sdpa.Options) error {
		return sdpa.ErrUnsupported
	}
	var out strings.Builder
	ok, err := config{attend: refuse}.runAccuracy(&out, "cpu", append(cases, cases...))
	if err != nil || ok || strings.Count(out.String(), "FAILED S:") != 2 {
		t.Errorf("refusing call: ok %v, err %v:\n%s", ok, err, out.String())
	}
}

// scriptShapes returns the shapes scripts/gpu-prefill-peers.sh times by
// default, from its text.
func scriptShapes(text string) []string {
	m := regexp.MustCompile(`shapes=\$\{SHAPES:-"([^"]*)"\}`).FindStringSubmatch(text)
	if m == nil {
		return nil
	}
	return strings.Fields(m[1])
}

// TestScriptShapes: the side-by-side script times sdpatest.PrefillShapes,
// in order (a copy of the script with one shape dropped fails).
func TestScriptShapes(t *testing.T) {
	b, err := os.ReadFile("../../scripts/gpu-prefill-peers.sh")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ps := range sdpatest.PrefillShapes {
		want = append(want, ps.Spec())
	}
	text := string(b)
	for _, c := range []struct {
		name, text string
		same       bool
	}{
		{"script", text, true},
		{"a shape dropped", strings.Replace(text, want[3]+" ", "", 1), false},
	} {
		got := scriptShapes(c.text)
		if same := slices.Equal(got, want); same != c.same {
			t.Errorf("%s: shapes %q, table %q: equal %v, want %v", c.name, got, want, same, c.same)
		}
	}
}
