package sdpa

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/sdpatest"
)

// rn64 is x·y + z with the product and the sum each rounded to float64
// (math/big at 53 bits, nearest even), whatever the compiler fuses: what
// the device's __dmul_rn and __dadd_rn compute.
func rn64(x, y, z float64) float64 {
	p := new(big.Float).SetPrec(53).SetMode(big.ToNearestEven)
	p.Mul(big.NewFloat(x), big.NewFloat(y))
	p.Add(p, big.NewFloat(z))
	f, _ := p.Float64()
	return f
}

// TestLSEShiftRounding: correctLSE's shift rounds each product and each
// sum separately, bit for bit as the device's correction does, also where
// the compiler fuses multiply-adds (arm64). A fused form differs in the
// last bits of most rows: TestArm64FusionCatchesMutants's fused forms,
// run for arm64 under qemu-aarch64-static, fail here.
func TestLSEShiftRounding(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 73))
	for _, d := range []int{1, 2, 64, 128} {
		for trial := range 50 {
			q, m := make([]float32, d), make([]float64, d)
			for c := range q {
				q[c], m[c] = float32(rng.NormFloat64()), rng.NormFloat64()/3
			}
			scale := float32(rng.Float64())
			var dot float64
			for c, x := range q {
				dot = rn64(float64(x), m[c], dot)
			}
			want := rn64(float64(scale), dot, 0)
			if got := lseShift(q, m, scale); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("d %d trial %d: shift %v (%#016x), want %v (%#016x) from separately rounded operations",
					d, trial, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		}
	}
	// correctLSE applies it to every row that sees a key, in either layout.
	q := &Tensor{Data: make([]float32, 2*4*3*8), B: 2, H: 4, S: 3, D: 8, Layout: BSHD}
	for i := range q.Data {
		q.Data[i] = float32(rng.NormFloat64())
	}
	means := make([]float64, 2*2*8)
	for i := range means {
		means[i] = rng.NormFloat64()
	}
	lse := make([]float32, 2*4*3)
	for i := range lse {
		lse[i] = float32(i)
	}
	lse[5] = float32(math.Inf(-1))
	got := append([]float32(nil), lse...)
	correctLSE(got, q, 2, means, 0.5)
	for bh := range 8 {
		b, h := bh/4, bh%4
		for i := range 3 {
			r := bh*3 + i
			want := float32(rn64(1, lseShift(q.row(b, h, i), means[(b*2+h/2)*8:], 0.5), float64(lse[r])))
			if r == 5 {
				want = lse[r]
			}
			if math.Float32bits(got[r]) != math.Float32bits(want) {
				t.Errorf("row %d: LSE %v, want %v", r, got[r], want)
			}
		}
	}
}
