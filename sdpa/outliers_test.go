package sdpa

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fp8attn/fp8attn/fp8"
	"github.com/fp8attn/fp8attn/sdpatest"
)

func TestOutlierDim(t *testing.T) {
	for _, c := range []struct{ d, n, want int }{
		{64, 0, 64}, {64, 1, 80}, {64, 4, 80}, {64, 5, 80}, {64, 6, 96}, {128, 4, 144}, {8, 8, 32}, {80, 5, 96},
	} {
		if got := outlierDim(c.d, c.n); got != c.want {
			t.Errorf("outlierDim(%d, %d) = %d, want %d", c.d, c.n, got, c.want)
		}
	}
}

// TestSplitRowExact: a widened query row times a widened key row is the
// rows' dot product (float64 sums of float32 products: exact but for the
// sums' rounding), the high parts are E4M3 codes times the scale, the
// remainders are at most half an E4M3 step, and the channels after the
// split ones are zero.
func TestSplitRowExact(t *testing.T) {
	sd := sdpatest.Seed()
	t.Logf("seed %d (FP8ATTN_SEED reproduces)", sd)
	rng := rand.New(rand.NewPCG(sd, 71))
	const d = 64
	chans := []int{3, 17, 40, 41, 0}
	dw := outlierDim(d, len(chans))
	for trial := range 200 {
		q, k := make([]float32, d), make([]float32, d)
		for c := range q {
			q[c], k[c] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		for _, c := range chans[:4] {
			k[c] *= 20
		}
		qs, ks := fp8.ScaleForAmax(fp8.Amax(q)), fp8.ScaleForAmax(fp8.Amax(k))
		wq, wk := make([]float32, dw), make([]float32, dw)
		for i := range wq {
			wq[i], wk[i] = float32(math.NaN()), float32(math.NaN()) // poison: every channel must be written
		}
		splitRow(wq, q, chans, qs, true)
		splitRow(wk, k, chans, ks, false)
		var want, got float64
		for c := range q {
			want += float64(q[c]) * float64(k[c])
		}
		for c := range wq {
			got += float64(wq[c]) * float64(wk[c])
		}
		if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) || got != got {
			t.Fatalf("trial %d: widened dot %v, rows' dot %v", trial, got, want)
		}
		for _, r := range []struct {
			w, x  []float32
			scale float32
		}{{wq, q, qs}, {wk, k, ks}} {
			for _, c := range chans {
				hi := r.w[c]
				if code := fp8.ToE4M3(hi/r.scale, fp8.NoSat); code.Float32()*r.scale != hi {
					t.Fatalf("trial %d: channel %d's high part %g is not a code times %g", trial, c, hi, r.scale)
				}
				lo := r.x[c] - hi
				if step := math.Abs(float64(hi)) / 16; math.Abs(float64(lo)) > step+float64(r.scale)/1024 {
					t.Fatalf("trial %d: channel %d: remainder %g of %g", trial, c, lo, r.x[c])
				}
			}
			for c := d + 3*len(chans); c < dw; c++ {
				if r.w[c] != 0 {
					t.Fatalf("trial %d: padding channel %d is %g", trial, c, r.w[c])
				}
			}
		}
	}
}

func TestLargestProducts(t *testing.T) {
	bits := func(x ...float32) []uint32 {
		b := make([]uint32, len(x))
		for i, v := range x {
			b[i] = math.Float32bits(v)
		}
		return b
	}
	kmax := bits(1, 20, 1, 3, 20, 0)
	qmax := bits(1, 1, 30, 1, 1, 100)
	for _, c := range []struct {
		n    int
		want []int
	}{{1, []int{2}}, {3, []int{2, 1, 4}}, {6, []int{2, 1, 4, 3, 0, 5}}} {
		got := make([]int, c.n)
		largestProducts(got, kmax, qmax)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("n=%d: %v, want %v", c.n, got, c.want)
				break
			}
		}
	}
}

// TestWidenNonFinite: a (batch, KV head) with an infinity or a NaN is
// copied unsplit (no high/low products that the plain call would not
// make); the other head of the call is split.
func TestWidenNonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.NaN())} {
		const d = 16
		mk := func(h int) *Tensor {
			x := &Tensor{Data: make([]float32, 2*h*4*d), B: 2, H: h, S: 4, D: d}
			for i := range x.Data {
				x.Data[i] = float32(i%7) - 2.5
			}
			return x
		}
		q, k, v, out := mk(2), mk(1), mk(1), mk(2)
		k.row(1, 0, 2)[5] = bad
		var b outlierBuffers
		wq, wk, _, _ := b.widen(q, k, v, out, 2)
		dw := wq.D
		for bb := range 2 {
			split := false
			for j := range k.S {
				extra := wk.row(bb, 0, j)[d:]
				for _, x := range extra {
					split = split || x != 0
				}
			}
			if want := bb == 0; split != want {
				t.Errorf("%v in batch 1: batch %d split %v, want %v (head dim %d)", bad, bb, split, want, dw)
			}
		}
	}
}
