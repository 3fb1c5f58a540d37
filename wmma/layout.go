// Package wmma models, in Go, which matrix element each lane of a warp holds
// in each tensor-core fragment our kernels use, and emulates a warp running
// the fused online-softmax step on such fragments.
//
// Every layout here is checked on each `go test` against dumps taken on an
// NVIDIA H200 (testdata/wmma, made by testdata/wmma/gen.sh from a compute_89
// PTX build and an sm_90 build; the two dumps are identical). WMMA's layouts
// are officially opaque and come from those dumps alone; the mma.sync layouts
// are the PTX ISA's ("Matrix Fragments for mma.m16n8k16" and "mma.m16n8k32")
// and the dumps confirm them. The wgmma accumulator layout is the PTX ISA's
// ("Register Fragments and Shared Memory Matrix Layouts", wgmma .m64nNk32,
// matrix D) and has NOT yet been dumped from hardware.
//
// In every layout lane l is split as g = l/4 (its "group", the quad index)
// and t = l%4 (its position in the quad).
package wmma

import "fmt"

// Layout maps (lane, element index) of a fragment to (row, col) of its
// matrix.
type Layout struct {
	// Name identifies the fragment in dumps and in the generated header.
	Name string
	// Rows, Cols are the matrix's size.
	Rows, Cols int
	// Elems is the number of elements per lane (fragment.num_elements).
	Elems int
	// Lanes is the number of threads sharing the fragment (32, or 128 for a
	// wgmma warpgroup).
	Lanes int
	// At returns the (row, col) element i of lane l holds.
	At func(l, i int) (row, col int)
	// Doc cites where the layout comes from.
	Doc string
}

// Table returns At for every lane and element: [lane][i] -> {row, col}.
func (L Layout) Table() [][][2]int {
	t := make([][][2]int, L.Lanes)
	for l := range t {
		t[l] = make([][2]int, L.Elems)
		for i := range t[l] {
			r, c := L.At(l, i)
			t[l][i] = [2]int{r, c}
		}
	}
	return t
}

// Inverse returns, for every (row, col), the (lane, element) pairs holding
// it, in lane order.
func (L Layout) Inverse() [][][][2]int {
	inv := make([][][][2]int, L.Rows)
	for r := range inv {
		inv[r] = make([][][2]int, L.Cols)
	}
	for l := 0; l < L.Lanes; l++ {
		for i := 0; i < L.Elems; i++ {
			r, c := L.At(l, i)
			inv[r][c] = append(inv[r][c], [2]int{l, i})
		}
	}
	return inv
}

// Coverage checks that every element of the matrix is held exactly copies
// times and that At stays inside the matrix.
func (L Layout) Coverage(copies int) error {
	seen := make([]int, L.Rows*L.Cols)
	for l := 0; l < L.Lanes; l++ {
		for i := 0; i < L.Elems; i++ {
			r, c := L.At(l, i)
			if r < 0 || r >= L.Rows || c < 0 || c >= L.Cols {
				return fmt.Errorf("%s: lane %d element %d maps outside the %dx%d matrix: (%d,%d)", L.Name, l, i, L.Rows, L.Cols, r, c)
			}
			seen[r*L.Cols+c]++
		}
	}
	for k, n := range seen {
		if n != copies {
			return fmt.Errorf("%s: element (%d,%d) held %d times, want %d", L.Name, k/L.Cols, k%L.Cols, n, copies)
		}
	}
	return nil
}

func gt(l int) (g, t int) { return l / 4, l % 4 }

// accum16x8 is the m16n8 accumulator pattern: element i of lane l holds row
// g + 8·(i/2), column 2t + i%2.
func accum16x8(l, i int) (int, int) {
	g, t := gt(l)
	return g + 8*(i>>1), 2*t + i&1
}

// Layouts. WMMA m16n16k16 fragments of matrix_a and matrix_b hold 16
// elements per lane on sm_89/sm_90, elements 8..15 repeating 0..7.
var (
	// WMMAAccF32 is wmma::fragment<accumulator,16,16,16,float>: two m16n8
	// accumulator tiles side by side, elements 0-3 in columns 0-7 and 4-7
	// in columns 8-15. Lane 0 holds (0,0),(0,1),(8,0),(8,1),(0,8),(0,9),
	// (8,8),(8,9) -- not the order the seed's table assumed.
	WMMAAccF32 = Layout{Name: "wmma_m16n16k16_acc_f32", Rows: 16, Cols: 16, Elems: 8, Lanes: 32,
		At: func(l, i int) (int, int) {
			r, c := accum16x8(l, i&3)
			return r, c + 8*(i>>2)
		}, Doc: "hardware dump (load_matrix_sync and mma_sync agree)"}
	// WMMAARowF16 is wmma::fragment<matrix_a,16,16,16,half,row_major>; the
	// col_major fragment holds the same logical elements.
	WMMAARowF16 = Layout{Name: "wmma_m16n16k16_a_row_f16", Rows: 16, Cols: 16, Elems: 16, Lanes: 32,
		At: func(l, i int) (int, int) { return WMMAAccF32.At(l, i&7) }, Doc: "hardware dump"}
	WMMAAColF16 = Layout{Name: "wmma_m16n16k16_a_col_f16", Rows: 16, Cols: 16, Elems: 16, Lanes: 32,
		At: WMMAARowF16.At, Doc: "hardware dump"}
	// WMMABColF16 is wmma::fragment<matrix_b,16,16,16,half,col_major> (and
	// row_major, which holds the same logical elements): element i of lane
	// l holds k = 2t + i%2 + 8·((i/2)%2), n = g + 8·((i/4)%2).
	WMMABColF16 = Layout{Name: "wmma_m16n16k16_b_col_f16", Rows: 16, Cols: 16, Elems: 16, Lanes: 32,
		At: func(l, i int) (int, int) {
			g, t := gt(l)
			return 2*t + i&1 + 8*((i>>1)&1), g + 8*((i>>2)&1)
		}, Doc: "hardware dump"}
	WMMABRowF16 = Layout{Name: "wmma_m16n16k16_b_row_f16", Rows: 16, Cols: 16, Elems: 16, Lanes: 32,
		At: WMMABColF16.At, Doc: "hardware dump"}
	// LdmatrixX4 is ldmatrix.sync.aligned.m8n8.x4.b16 of a 16x16 tile with
	// lane l addressing row l%16, column 8·(l/16): it yields the mma.m16n8k16
	// A fragment.
	LdmatrixX4 = Layout{Name: "ldmatrix_x4_b16", Rows: 16, Cols: 16, Elems: 8, Lanes: 32,
		At: func(l, i int) (int, int) { return MMAF16A.At(l, i) }, Doc: "PTX ISA ldmatrix; hardware dump"}

	// MMAF16A is mma.m16n8k16 (f16) matrix A, 16x16: row g + 8·((i/2)%2),
	// column 2t + i%2 + 8·(i/4).
	MMAF16A = Layout{Name: "mma_m16n8k16_f16_a", Rows: 16, Cols: 16, Elems: 8, Lanes: 32,
		At: func(l, i int) (int, int) {
			g, t := gt(l)
			return g + 8*((i>>1)&1), 2*t + i&1 + 8*(i>>2)
		}, Doc: "PTX ISA, mma.m16n8k16 fragment A (.f16); hardware products"}
	// MMAF16B is mma.m16n8k16 (f16) matrix B, 16x8: k = 2t + i%2 + 8·(i/2),
	// n = g.
	MMAF16B = Layout{Name: "mma_m16n8k16_f16_b", Rows: 16, Cols: 8, Elems: 4, Lanes: 32,
		At: func(l, i int) (int, int) {
			g, t := gt(l)
			return 2*t + i&1 + 8*(i>>1), g
		}, Doc: "PTX ISA, mma.m16n8k16 fragment B (.f16); hardware products"}
	// MMAC is the m16n8 f32 accumulator of mma.sync (k16 f16 and k32 e4m3).
	MMAC = Layout{Name: "mma_m16n8_c_f32", Rows: 16, Cols: 8, Elems: 4, Lanes: 32,
		At: accum16x8, Doc: "PTX ISA, mma.m16n8kK fragment C/D (.f32); hardware products"}
	// MMAE4M3A is mma.m16n8k32 (e4m3) matrix A, 16x32: row g + 8·((i/4)%2),
	// column 4t + i%4 + 16·(i/8).
	MMAE4M3A = Layout{Name: "mma_m16n8k32_e4m3_a", Rows: 16, Cols: 32, Elems: 16, Lanes: 32,
		At: func(l, i int) (int, int) {
			g, t := gt(l)
			return g + 8*((i>>2)&1), 4*t + i&3 + 16*(i>>3)
		}, Doc: "PTX ISA, mma.m16n8k32 fragment A (.e4m3); hardware products"}
	// MMAE4M3B is mma.m16n8k32 (e4m3) matrix B, 32x8: k = 4t + i%4 + 16·(i/4),
	// n = g.
	MMAE4M3B = Layout{Name: "mma_m16n8k32_e4m3_b", Rows: 32, Cols: 8, Elems: 8, Lanes: 32,
		At: func(l, i int) (int, int) {
			g, t := gt(l)
			return 4*t + i&3 + 16*(i>>2), g
		}, Doc: "PTX ISA, mma.m16n8k32 fragment B (.e4m3); hardware products"}
)

// WGMMAAcc returns the accumulator layout of wgmma.mma_async .m64nNk32
// (e4m3 inputs, f32 accumulator) for a warpgroup of 128 threads: thread
// T = 32w + l holds N/2 elements, element i at row 16w + g + 8·((i/2)%2),
// column 8·(i/4) + 2t + i%2. From the PTX ISA; verified for N = 64 on an
// H200 (testdata/wmma/wgmmadump.cu, TestHardwareWGMMA); other N follow the
// ISA's pattern and have not been dumped.
func WGMMAAcc(n int) Layout {
	return Layout{Name: fmt.Sprintf("wgmma_m64n%dk32_acc_f32", n), Rows: 64, Cols: n, Elems: n / 2, Lanes: 128,
		At: func(T, i int) (int, int) {
			w, l := T/32, T%32
			g, t := gt(l)
			return 16*w + g + 8*((i>>1)&1), 8*(i>>2) + 2*t + i&1
		}, Doc: "PTX ISA, wgmma .m64nNk32 matrix D; verified for N=64 on an H200 (sm_90a dump)"}
}

// WGMMAE4M3A is wgmma.mma_async .m64nNk32 (e4m3) matrix A from registers,
// 64x32, for a warpgroup: thread T = 32w + l holds four 32-bit registers of
// four codes each; element e (register e/4, byte e%4, lowest byte first)
// is at row 16w + g + 8·((e/4)%2), column 4t + e%4 + 16·(e/8). Each warp's
// 16 rows are the mma.m16n8k32 A fragment (MMAE4M3A). From the PTX ISA;
// verified on an H200 (testdata/wmma/wgmmars.cu, TestHardwareWGMMARS). The
// Hopper kernel hands P to P·V in this layout.
var WGMMAE4M3A = Layout{Name: "wgmma_m64nNk32_e4m3_a", Rows: 64, Cols: 32, Elems: 16, Lanes: 128,
	At: func(T, e int) (int, int) {
		w, l := T/32, T%32
		g, t := gt(l)
		return 16*w + g + 8*((e>>2)&1), 4*t + e&3 + 16*(e>>3)
	}, Doc: "PTX ISA, wgmma .m64nNk32 matrix A in registers (.e4m3); hardware products (sm_90a dump)"}

// SigmaKey is the key at position q (0-15) of a 16-key group of a V image
// (the device copy of V that stages 9 and 10 read for P·V): 2·(q/4) + q%2 +
// 8·((q/2)%2). With the keys of every 16-key group stored in this order,
// P goes from the Q·Kᵀ accumulators to the e4m3 A operand of P·V in the same
// lane, by conversions alone (AccToE4M3A).
func SigmaKey(q int) int { return 2*(q/4) + q%2 + 8*((q/2)%2) }

// AccToE4M3A is the register-to-register hand-over of P from Q·Kᵀ to P·V:
// element e of the mma.m16n8k32 e4m3 A fragment (MMAE4M3A; register e/4,
// byte e%4) of a 32-key step holds, in the same lane, element i of the
// m16n8 accumulator (MMAC) of n-tile tile (0-3) of that step, when the
// step's 32 A columns are keys in SigmaKey order within each 16-key group.
// The Ada kernel (stage 10) packs its A registers by it; the Hopper kernel's
// wgmma A layout (WGMMAE4M3A) is the same per warp. Verified on the H200
// (testdata/wmma/accfp8.cu, TestHardwareAccToE4M3A).
func AccToE4M3A(e int) (tile, i int) {
	r, b := e/4, e%4
	return 2*(r/2) + b/2, 2*(r%2) + b%2
}

// Fragments lists the layouts whose dumps are coded tiles, by dump name
// (the accumulator's two dumps, after load and after mma, are checked
// separately).
var Fragments = []Layout{WMMAARowF16, WMMAAColF16, WMMABRowF16, WMMABColF16, LdmatrixX4}

// All lists every layout, for the header generator.
func All() []Layout {
	return append(append([]Layout{}, Fragments...), WMMAAccF32, MMAF16A, MMAF16B, MMAC, MMAE4M3A, MMAE4M3B, WGMMAAcc(64))
}
