//go:build cuda

package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/backend"
	"github.com/fp8attn/fp8attn/internal/poison"
	"github.com/fp8attn/fp8attn/internal/tiles"
	"github.com/fp8attn/fp8attn/sdpatest"
)

// TestQuantLongRepeats runs quant_pack9's long form on calls back to back,
// with nothing between them that touches its scratch words, and holds each
// call's output and LSE bit for bit to Quantize then AttentionOn on the
// same inputs: every launch leaves its ticket and each head's words
// cleared. The second input set is the first times 0.3 (every head's amax
// smaller, by no power of two), so that an amax kept from the call before
// changes the scale and the codes. Two shapes: a few heads, and enough
// heads that their scratch words (2 + 2 a head) are more than two strides
// of the long form's block (quantLong.Threads): hq query heads and hq/2
// KV heads in each of 2 batch entries are 4·hq heads, 2 + 8·hq words.
// The kernel mutants qpl-ticket-not-cleared, qpl-head-amax-not-cleared
// and qpl-clear-one-stride fail it.
func TestQuantLongRepeats(t *testing.T) {
	d := hopperDevice(t)
	seed := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", seed)
	rng := rand.New(rand.NewPCG(seed, 41))
	hq := 2 * (d.quantLong.Threads/8 + 4) // 2 + 8·hq > 2·Threads
	for _, s := range []backend.Shape{
		{B: 2, Hq: 4, Hkv: 2, Sq: 600, Sk: 1100, D: 64},
		{B: 2, Hq: hq, Hkv: hq / 2, Sq: 600, Sk: 1100, D: 64},
	} {
		p := &backend.Problem{Shape: s, Scale: 0.125, Mask: backend.CausalLowerRight, Layout: backend.BHSD}
		if long, ok := d.quantPackFor(p); !ok || !long {
			t.Skipf("%+v is not the long form's here (geometry %+v)", s, d.quantLong)
		}
		quantLongRepeats(t, d, rng, p)
	}
}

// quantLongRepeats is TestQuantLongRepeats on one problem.
func quantLongRepeats(t *testing.T, d *device, rng *rand.Rand, p *backend.Problem) {
	t.Helper()
	b := &kernelBackend{name: "cuda/sm90", stage: tiles.HopperStage}
	s := p.Shape
	in := sdpatest.RandomInputs(rng, s, 1)
	scaled := func(x []float32) []float32 {
		y := make([]float32, len(x))
		for i := range x {
			y[i] = 0.3 * x[i]
		}
		return y
	}
	sets := [2][3][]float32{{in.Q, in.K, in.V}, {scaled(in.Q), scaled(in.K), scaled(in.V)}}
	nq, nl := s.B*s.Hq*s.Sq*s.D, s.B*s.Hq*s.Sq
	var srcs [2][]*buffer
	var want [2][2][]float32 // output, LSE a set
	out, lse := mustAlloc(t, d, 4*nq), mustAlloc(t, d, 4*nl)
	defer func() { out.Free(); lse.Free() }()
	// run writes poison to out and lse, calls call, and reads them back.
	run := func(call func() error) [2][]float32 {
		t.Helper()
		pois := make([]float32, nq)
		for i := range pois {
			pois[i] = math.Float32frombits(poison.Bits)
		}
		if err := errors.Join(out.Write(bytesOf(pois)), lse.Write(bytesOf(pois[:nl]))); err != nil {
			t.Fatal(err)
		}
		if err := call(); err != nil {
			t.Fatal(err)
		}
		got := [2][]float32{make([]float32, nq), make([]float32, nl)}
		if err := errors.Join(out.Read(bytesOf(got[0])), lse.Read(bytesOf(got[1]))); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i, set := range sets {
		bufs, free := floatBuffers(t, d, set[0], set[1], set[2])
		defer free()
		srcs[i] = bufs
		var jobs []backend.QuantizeJob
		var quantized [6]backend.Buffer
		for j, src := range bufs {
			h, n := s.Hkv, s.Sk
			if j == 0 {
				h, n = s.Hq, s.Sq
			}
			codes, scales := mustAlloc(t, d, s.B*h*n*s.D), mustAlloc(t, d, 4*s.B*h)
			defer func() { codes.Free(); scales.Free() }()
			quantized[j], quantized[3+j] = codes, scales
			jobs = append(jobs, backend.QuantizeJob{Codes: codes, Scales: scales, Src: src, B: s.B, H: h, S: n, D: s.D, Layout: p.Layout})
		}
		want[i] = run(func() error { return errors.Join(b.Quantize(jobs...), b.AttentionOn(p, out, lse, quantized)) })
	}
	for call, i := range []int{0, 1, 0} {
		got := run(func() error { return b.AttentionQuantizing(p, out, lse, srcs[i][0], srcs[i][1], srcs[i][2]) })
		for j, what := range []string{"output", "LSE"} {
			for e, x := range want[i][j] {
				if y := got[j][e]; math.Float32bits(x) != math.Float32bits(y) || math.Float32bits(y) == poison.Bits {
					t.Fatalf("%+v call %d (input set %d): %s %d is %g, %g from Quantize and AttentionOn", s, call, i, what, e, y, x)
				}
			}
		}
	}
}

// mustAlloc returns a device buffer of n bytes.
func mustAlloc(t testing.TB, d *device, n int) *buffer {
	t.Helper()
	x, err := d.Alloc(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	return x
}
