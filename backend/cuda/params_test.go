package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/backend/cuda/kernels"
	"github.com/fp8attn/fp8attn/internal/mutant"
	"github.com/fp8attn/fp8attn/internal/tiles"
)

// ptxIntArray reads the initializer of a global int array from PTX, as
// .b32/.u32 words or as .b8 bytes (little-endian words). nvcc leaves out
// trailing zero elements; they are restored up to the declared length.
func ptxIntArray(ptx, name string) ([]int, error) {
	re := regexp.MustCompile(`\.global\s+(?:\.align\s+\d+\s+)?\.(b8|b32|u32|s32)\s+` + regexp.QuoteMeta(name) + `\[(\d+)\]\s*=\s*\{([^}]*)\}`)
	m := re.FindStringSubmatch(ptx)
	if m == nil {
		return nil, fmt.Errorf("no initialized array %s in the PTX", name)
	}
	n, _ := strconv.Atoi(m[2])
	var vals []int
	for _, f := range strings.Split(m[3], ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		vals = append(vals, v)
	}
	if len(vals) > n {
		return nil, fmt.Errorf("%s: %d elements in an array of %d", name, len(vals), n)
	}
	vals = append(vals, make([]int, n-len(vals))...)
	if m[1] != "b8" {
		return vals, nil
	}
	if len(vals)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes", name, len(vals))
	}
	words := make([]int, len(vals)/4)
	for i := range words {
		words[i] = vals[4*i] | vals[4*i+1]<<8 | vals[4*i+2]<<16 | vals[4*i+3]<<24
	}
	return words, nil
}

// TestParamsLayoutMatchesPTX: the Go params struct has the size and field
// offsets the kernel compiler gave struct Params (common.cuh), as the
// committed PTX's fp8attn_params_layout records them. The module load
// repeats the check on the device with whatever PTX it loads.
func TestParamsLayoutMatchesPTX(t *testing.T) {
	for name, ptx := range map[string]string{"compute_89": kernels.PTX, "compute_80": kernels.PTX80} {
		got, err := ptxIntArray(ptx, "fp8attn_params_layout")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := paramsLayout()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s PTX Params layout (sizeof, offsets) %v, Go params %v", name, got, want)
		}
	}
}

// TestModuleLayoutsMatchPTX: the same for the paged module's two parameter
// blocks and the quantization kernels' three, in both builds (compute_89
// and compute_80) of their modules.
func TestModuleLayoutsMatchPTX(t *testing.T) {
	for _, m := range []struct {
		checks []layoutCheck
		ptx    map[string]string
	}{
		{pagedLayouts, map[string]string{"compute_89": kernels.PagedPTX, "compute_80": kernels.PagedPTX80}},
		{quantLayouts, map[string]string{"compute_89": kernels.PTX, "compute_80": kernels.PTX80}},
		{hopperLayouts, map[string]string{"compute_90a": kernels.HopperPTX}},
	} {
		for _, c := range m.checks {
			for arch, ptx := range m.ptx {
				got, err := ptxIntArray(ptx, c.name)
				if err != nil {
					t.Fatalf("%s: %v", arch, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("%s %s: PTX %v, Go %v", arch, c.name, got, c.want)
				}
			}
		}
	}
}

// TestPTXArrayParser: both forms nvcc writes arrays in.
func TestPTXArrayParser(t *testing.T) {
	for _, ptx := range []string{
		".visible .global .align 4 .b32 x[3] = {208, 0, 8};",
		".visible .global .align 4 .b8 x[12] = {208, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0};",
		".global .align 4 .b8 x[12] = {208, 0, 0, 0, 0, 0, 0, 0, 8};", // trailing zeros left out
	} {
		got, err := ptxIntArray(ptx, "x")
		if err != nil || fmt.Sprint(got) != "[208 0 8]" {
			t.Errorf("%q: %v %v", ptx, got, err)
		}
	}
	if _, err := ptxIntArray(".global .b32 y[1] = {1};", "x"); err == nil {
		t.Error("missing array accepted")
	}
}

// TestScoreScales: each head's factor is the float64 product of the scale,
// its Q descale, its KV head's K descale and log2(e), rounded once, also
// where scale·log2(e) alone overflows float32.
func TestScoreScales(t *testing.T) {
	p := &backend.Problem{Shape: backend.Shape{B: 2, Hq: 4, Hkv: 2, Sq: 1, Sk: 1, D: 64}, Scale: 3e38,
		QScale: []float32{1e-20, 2e-20, 3e-20, 4e-20, 5e-20, 6e-20, 7e-20, 8e-20},
		KScale: []float32{1e-21, 2e-21, 3e-21, 4e-21}}
	got := scoreScales(p)
	for bh, g := range got {
		b, h := bh/p.Hq, bh%p.Hq
		want := float32(3e38 * float64(p.QScale[bh]) * float64(p.KScale[b*p.Hkv+h/2]) * math.Log2E)
		if g != want || math.IsInf(float64(g), 0) {
			t.Errorf("head %d: %g, want %g", bh, g, want)
		}
	}
}

// TestParamsStrides: the strides the kernels index rows by, in both layouts.
func TestParamsStrides(t *testing.T) {
	p := &backend.Problem{Shape: backend.Shape{B: 2, Hq: 4, Hkv: 2, Sq: 5, Sk: 7, D: 64}}
	bh := newParams(p, deviceBuffers{})
	p.Layout = backend.BSHD
	bs := newParams(p, deviceBuffers{})
	for _, c := range []struct {
		name      string
		got, want [3]int64
	}{
		{"bhsd q", [3]int64{bh.QBatchStride, bh.QHeadStride, bh.QRowStride}, [3]int64{4 * 5 * 64, 5 * 64, 64}},
		{"bhsd kv", [3]int64{bh.KVBatchStride, bh.KVHeadStride, bh.KVRowStride}, [3]int64{2 * 7 * 64, 7 * 64, 64}},
		{"bshd q", [3]int64{bs.QBatchStride, bs.QHeadStride, bs.QRowStride}, [3]int64{5 * 4 * 64, 64, 4 * 64}},
		{"bshd kv", [3]int64{bs.KVBatchStride, bs.KVHeadStride, bs.KVRowStride}, [3]int64{7 * 2 * 64, 64, 2 * 64}},
		{"bshd out", [3]int64{bs.OBatchStride, bs.OHeadStride, bs.ORowStride}, [3]int64{5 * 4 * 64, 64, 4 * 64}},
	} {
		if c.got != c.want {
			t.Errorf("%s: strides %v, want %v", c.name, c.got, c.want)
		}
	}
}

// prefillInputsSource is the gather's source, embedded so that the test
// binary reads it wherever it runs.
//
//go:embed kernels/paged/prefill_inputs.cuh
var prefillInputsSource string

// TestPrefillZeroKeys: the paged prefill's gather writes zeros past a
// shorter sequence's last key up to a multiple of prefillZeroKeys, which
// kernels/paged/prefill_inputs.cuh spells as its rounding; every stage-9
// key tile (and the one-tile form's two) ends on such a multiple, so the
// tile holding the sequence's last key holds no stale code.
func TestPrefillZeroKeys(t *testing.T) {
	if round := fmt.Sprintf("(n + %d) / %d * %d", prefillZeroKeys-1, prefillZeroKeys, prefillZeroKeys); !strings.Contains(prefillInputsSource, round) {
		t.Errorf("prefill_inputs.cuh does not round a sequence's zeros as %q (prefillZeroKeys %d)", round, prefillZeroKeys)
	}
	for _, d := range tiles.HopperHeadDims {
		c, err := tiles.Hopper(d)
		if err != nil {
			t.Fatal(err)
		}
		tile := c.BlockN
		if c.OneTile(2 * c.BlockN) {
			tile = 2 * c.BlockN
		}
		if prefillZeroKeys%c.BlockN != 0 || tile > prefillZeroKeys {
			t.Errorf("D %d: key tiles of %d (the one-tile form's %d), zeros to a multiple of %d", d, c.BlockN, tile, prefillZeroKeys)
		}
	}
}

// TestPrefillZeroKeysCatchesMutants: a rounding the kernel does not use,
// or one a key tile does not divide, fails TestPrefillZeroKeys
// (FP8ATTN_MUTANTS=1).
func TestPrefillZeroKeysCatchesMutants(t *testing.T) {
	const pkg, file = "./backend/cuda", "backend/cuda/params.go"
	mutant.Run(t, []mutant.Mutant{
		{Name: "zeros to a multiple the kernel does not round to", File: file, Pkg: pkg,
			Old: "const prefillZeroKeys = 256", New: "const prefillZeroKeys = 512", Tests: []string{"TestPrefillZeroKeys"}},
		{Name: "zeros to a multiple a key tile does not divide", File: file, Pkg: pkg,
			Old: "const prefillZeroKeys = 256", New: "const prefillZeroKeys = 192", Tests: []string{"TestPrefillZeroKeys"}},
	})
}
