package wmma

import (
	"fmt"
	"math"
)

// ShflXor returns what __shfl_xor_sync(0xffffffff, v, mask) gives every
// lane: lane l receives v[l^mask]. Lanes are taken in warps of 32 (a
// warpgroup is four independent warps).
func ShflXor(v []float32, mask int) []float32 {
	out := make([]float32, len(v))
	for l := range v {
		out[l] = v[(l&^31)|((l&31)^mask)]
	}
	return out
}

// Shfl returns what __shfl_sync(0xffffffff, v, src(l)) gives every lane:
// lane l receives v from lane src(l) of its own warp.
func Shfl(v []float32, src func(l int) int) []float32 {
	out := make([]float32, len(v))
	for l := range v {
		out[l] = v[(l&^31)|(src(l)&31)]
	}
	return out
}

// SoftmaxWarp emulates the threads of a fused attention kernel that own a
// tile of Rows query rows (16 per warp) and run the online softmax on score
// fragments, as a kernel would: the lanes of a quad share two rows (row
// g and g+8 of their warp's 16), row max and row sum go through
// __shfl_xor_sync with masks 1 and 2, the running output is rescaled per
// row, and P is stored to a shared-memory tile for the P·V product.
//
// Hardware is the layout the tensor cores really produce the scores in;
// Kernel is the layout the kernel's code believes (the generated header).
// With Kernel == Hardware the emulation equals the row-wise online softmax;
// with any error in Kernel it does not, which is what the tests prove.
type SoftmaxWarp struct {
	Hardware, Kernel Layout
	D                int // head dimension of V and the output

	m, l [][2]float32 // per lane, per row slot: running max and sum
	o    [][]float32  // per lane: output elements, MMAC layout tiled over D
}

// NewSoftmaxWarp returns the emulator in its initial state (max -Inf, sum
// 0, output 0). Both layouts must be accumulators of the same size.
func NewSoftmaxWarp(hw, kernel Layout, d int) (*SoftmaxWarp, error) {
	if hw.Rows != kernel.Rows || hw.Cols != kernel.Cols || hw.Lanes != kernel.Lanes || hw.Elems != kernel.Elems {
		return nil, fmt.Errorf("layouts %s and %s differ in size", hw.Name, kernel.Name)
	}
	if hw.Rows != 16*(hw.Lanes/32) || d%8 != 0 {
		return nil, fmt.Errorf("want 16 rows per warp and D a multiple of 8")
	}
	w := &SoftmaxWarp{Hardware: hw, Kernel: kernel, D: d,
		m: make([][2]float32, hw.Lanes), l: make([][2]float32, hw.Lanes), o: make([][]float32, hw.Lanes)}
	for l := range w.m {
		w.m[l] = [2]float32{float32(math.Inf(-1)), float32(math.Inf(-1))}
		w.o[l] = make([]float32, d/2) // 2 rows x d/4 columns per lane
	}
	return w, nil
}

// outAt returns the (row, col) of output element k of lane l: the m16n8
// accumulator layout of the lane's warp, repeated every 8 columns.
func outAt(l, k int) (row, col int) {
	r, c := accum16x8(l&31, k&3)
	return 16*(l/32) + r, c + 8*(k>>2)
}

// slot returns which of its two rows a lane believes element row r is.
func slot(l, r int) int {
	if r-16*(l/32) >= 8 {
		return 1
	}
	return 0
}

// Step runs one KV tile: s is the tile's Rows x Cols scaled scores, v its
// Cols x D values. visible(r, c) says whether query row r sees key column c
// (the kernel's mask: partial tiles, causal diagonals).
func (w *SoftmaxWarp) Step(s [][]float32, v [][]float32, visible func(r, c int) bool) {
	L, negInf := w.Kernel, float32(math.Inf(-1))
	lanes := L.Lanes
	// 1. Each lane's registers, as the hardware filled them; masked by the
	// kernel's belief of where each element sits.
	x := make([][]float32, lanes)
	for l := range x {
		x[l] = make([]float32, L.Elems)
		for i := range x[l] {
			hr, hc := w.Hardware.At(l, i)
			x[l][i] = s[hr][hc]
			if r, c := L.At(l, i); !visible(r, c) {
				x[l][i] = negInf
			}
		}
	}
	// 2. Row max: per lane per slot, then across the quad.
	var mx [2][]float32
	for k := range mx {
		mx[k] = make([]float32, lanes)
		for l := range mx[k] {
			mx[k][l] = negInf
			for i, xi := range x[l] {
				if r, _ := L.At(l, i); slot(l, r) == k {
					mx[k][l] = max(mx[k][l], xi)
				}
			}
		}
		for _, mask := range []int{1, 2} {
			other := ShflXor(mx[k], mask)
			for l := range other {
				mx[k][l] = max(mx[k][l], other[l])
			}
		}
	}
	// 3. New max; a row that has seen only -Inf uses 0 so that exp gives 0,
	// never NaN. alpha rescales the old sum and output.
	var alpha, mUse [2][]float32
	for k := range alpha {
		alpha[k], mUse[k] = make([]float32, lanes), make([]float32, lanes)
		for l := 0; l < lanes; l++ {
			mNew := max(w.m[l][k], mx[k][l])
			mUse[k][l] = mNew
			if mNew == negInf {
				mUse[k][l] = 0
			}
			alpha[k][l] = float32(math.Exp(float64(w.m[l][k] - mUse[k][l])))
			w.m[l][k] = mNew
		}
	}
	// 4. Exponentials and row sums.
	p := make([][]float32, lanes)
	var sum [2][]float32
	sum[0], sum[1] = make([]float32, lanes), make([]float32, lanes)
	for l := range p {
		p[l] = make([]float32, L.Elems)
		for i, xi := range x[l] {
			r, _ := L.At(l, i)
			k := slot(l, r)
			p[l][i] = float32(math.Exp(float64(xi - mUse[k][l])))
			sum[k][l] += p[l][i]
		}
	}
	for k := range sum {
		for _, mask := range []int{1, 2} {
			other := ShflXor(sum[k], mask)
			for l := range other {
				sum[k][l] += other[l]
			}
		}
		for l := 0; l < lanes; l++ {
			w.l[l][k] = w.l[l][k]*alpha[k][l] + sum[k][l]
		}
	}
	// 5. P to shared memory by the kernel's table (duplicated elements
	// write the same value twice), then O = alpha·O + P·V.
	ps := make([][]float32, L.Rows)
	for r := range ps {
		ps[r] = make([]float32, L.Cols)
	}
	for l := range p {
		for i, pi := range p[l] {
			r, c := L.At(l, i)
			ps[r][c] = pi
		}
	}
	for l := 0; l < lanes; l++ {
		for k := range w.o[l] {
			r, d := outAt(l, k)
			acc := w.o[l][k] * alpha[slot(l, r)][l]
			for j := range ps[r] {
				acc += ps[r][j] * v[j][d]
			}
			w.o[l][k] = acc
		}
	}
}

// Finish returns the Rows x D output (O / l; zeros for a row that saw no
// key) and each row's natural log-sum-exp (-Inf for such a row).
func (w *SoftmaxWarp) Finish() (out [][]float32, lse []float32) {
	rows := w.Kernel.Rows
	out = make([][]float32, rows)
	for r := range out {
		out[r] = make([]float32, w.D)
	}
	lse = make([]float32, rows)
	for l := range w.o {
		for k, o := range w.o[l] {
			r, d := outAt(l, k)
			s := slot(l, r)
			if w.l[l][s] == 0 {
				lse[r] = float32(math.Inf(-1))
				continue
			}
			out[r][d] = o / w.l[l][s]
			lse[r] = w.m[l][s] + float32(math.Log(float64(w.l[l][s])))
		}
	}
	return out, lse
}
